/* The scalar attention kernel: the definition the SIMD kernels are tested
 * against (attn.h). Row by row (token i, query head h), key by key, with a
 * streaming softmax: when a score exceeds the running max m, the sum and
 * the partial output are rescaled by exp(m_old - m_new), so
 *     out = sum_p exp(s_p - m) V_p / sum_p exp(s_p - m),  m = max_p s_p
 * exactly as softmax-then-sum, without a context-length score buffer. */
#include "kernels/attn.h"

#include <math.h>

void nb_attn_ref(const nb_attn_tile *t) {
    const nb_attn_kv *kv = t->kv;
    const int32_t hd = kv->head_dim, bs = kv->block_size;
    for (int i = 0; i < t->nt; i++)
        for (int h = 0; h < t->nq; h++) {
            const float *q = t->q + (int64_t)i * t->q_stride + (int64_t)h * hd;
            float *o = t->out + (int64_t)i * t->out_stride + (int64_t)h * hd;
            float m = -INFINITY, l = 0;
            for (int32_t j = 0; j < hd; j++) o[j] = 0;
            for (int32_t p = 0; p <= t->pos0 + i; p++) {
                int64_t idx = (int64_t)t->blocks[p / bs] * bs + p % bs;
                const int64_t off = nb_attn_kv_off(kv, t->blocks[p / bs], p % bs, t->kvh);
                const uint8_t *k = kv->k + off, *v = kv->v + off;
                float d = 0;
                for (int32_t j = 0; j < hd; j++) d += nb_attn_elem(kv->type, k, j) * q[j];
                if (kv->ks) d *= kv->ks[idx * kv->n_head_kv + t->kvh];
                d *= t->scale;
                if (d > m) {
                    float c = expf(m - d); /* 0 for the first key */
                    l *= c;
                    for (int32_t j = 0; j < hd; j++) o[j] *= c;
                    m = d;
                }
                float w = expf(d - m);
                l += w;
                if (kv->vs) w *= kv->vs[idx * kv->n_head_kv + t->kvh];
                for (int32_t j = 0; j < hd; j++) o[j] += w * nb_attn_elem(kv->type, v, j);
            }
            float inv = 1.0f / l;
            for (int32_t j = 0; j < hd; j++) o[j] *= inv;
            if (t->lse) t->lse[i * t->nq + h] = m + logf(l);
        }
}
