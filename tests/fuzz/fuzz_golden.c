/* libFuzzer target for golden-set JSONL (eval/golden.c): a set file is
 * user-supplied (examples/golden/, or a file an operator downloaded). Any
 * input must load or fail with a message naming the line; a loaded set's
 * checks (regex, schema, number, choice, all/any trees) are then judged
 * against a few short outputs, including the item's own prompt, so the
 * judging paths see what the parser accepted. Never crash, leak or hang. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "eval/golden.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *OUTPUTS[] = {"", "  42 ", "{\"a\": [1, 2.5, \"x\"], \"b\": null}", "1,234.5 apples", "yes\n"};

static void judge_all(const nb_golden_item *it) {
    nb_golden_verdict v;
    if (it->check.kind == NB_GCHK_CHOICE) {
        double ll[64];
        size_t n = it->check.n_options < 64 ? it->check.n_options : 64;
        for (size_t i = 0; i < n; i++) ll[i] = -(double)((i * 7u) % 5u);
        if (n == it->check.n_options) nb_golden_judge_choice(&it->check, ll, &v);
        return;
    }
    for (size_t i = 0; i < sizeof OUTPUTS / sizeof *OUTPUTS; i++)
        nb_golden_judge(&it->check, OUTPUTS[i], strlen(OUTPUTS[i]), &v);
    if (it->prompt) {
        size_t n = strlen(it->prompt);
        nb_golden_judge(&it->check, it->prompt, n < 256 ? n : 256, &v);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    nb_golden_set s;
    memset(&s, 0, sizeof s);
    nb_status st = nb_golden_set_parse((const char *)data, size, "fuzz.jsonl", &s);
    if (st != NB_OK) {
        /* a failure must say what was wrong */
        if (!nb_errmsg() || !*nb_errmsg()) __builtin_trap();
        return 0;
    }
    if (s.n_items == 0) __builtin_trap(); /* an empty set is an error */
    nb_golden_summary sum;
    memset(&sum, 0, sizeof sum);
    for (size_t i = 0; i < s.n_items; i++) {
        judge_all(&s.items[i]);
        nb_golden_verdict v = {.pass = (i & 1) != 0};
        if (nb_golden_summary_add(&sum, &s.items[i], &v) != NB_OK) break;
    }
    nb_golden_summary_free(&sum);
    nb_golden_set_free(&s);
    return 0;
}
