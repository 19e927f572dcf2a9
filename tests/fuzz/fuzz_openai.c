/* libFuzzer target for the server's request parser: the first byte picks
 * /v1/completions or /v1/chat/completions, the rest is the HTTP body. Any
 * input must give either a parsed request or a 400 error, never a crash. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "server/openai.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    nb_oai_request r;
    nb_oai_error e;
    bool ok = nb_oai_parse(data[0] & 1 ? NB_OAI_CHAT : NB_OAI_COMPLETIONS, (const char *)data + 1, size - 1, &r, &e);
    if (!ok) {
        if (e.status != 400) __builtin_trap();
        char *j = nb_oai_error_json(&e);
        free(j);
    }
    nb_oai_request_free(&r);
    return 0;
}
