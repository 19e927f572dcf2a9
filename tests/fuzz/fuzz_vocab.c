/* libFuzzer target for the tokenizer file parsers. The first input byte
 * picks the format (0: SentencePiece tokenizer.model protobuf, 1: llama2.c
 * tokenizer.bin, 2: HF tokenizer.json); the rest is the file. A vocabulary
 * that parses is turned into a tokenizer, which tokenizes and detokenizes a
 * fixed text - so malformed-but-accepted vocabularies are exercised too. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "formats/vocab.h"
#include "tokenizer/tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    nb_vocab *v = NULL;
    nb_status st;
    switch (data[0] % 3) {
    case 0: st = nb_vocab_from_spm_model(data + 1, size - 1, "fuzz.model", &v); break;
    case 1: st = nb_vocab_from_llama2c(data + 1, size - 1, -1, "fuzz.bin", &v); break;
    default: st = nb_vocab_from_hf_json((const char *)data + 1, size - 1, NULL, 0, "fuzz.json", &v); break;
    }
    if (st != NB_OK) return 0;
    nb_tokenizer *t;
    if (nb_tokenizer_create(v, &t) != NB_OK) return 0; /* takes v */
    static const char text[] = "Hello world! <s> 12345 \xe4\xbd\xa0\xe5\xa5\xbd \xf0\x9f\x98\x80\n\tend";
    int32_t *ids;
    size_t n;
    if (nb_tokenize(t, text, sizeof text - 1, true, true, &ids, &n) == NB_OK) {
        char *out;
        size_t len;
        if (nb_detokenize(t, ids, n, false, &out, &len) == NB_OK) free(out);
        free(ids);
    }
    nb_tokenizer_free(t);
    return 0;
}
