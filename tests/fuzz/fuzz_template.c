/* libFuzzer target for the Jinja engine (templates come from downloaded
 * model files): the input is template text, optionally followed by a NUL
 * byte and a JSON context; without one a fixed chat context (messages with
 * a tool call, tools) is used. Any input must parse or fail with a
 * message, and render or fail with a message within the step, output and
 * memory limits: never crash, hang or exhaust memory. */
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "template/jinja.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *CTX =
    "{\"bos_token\":\"<s>\",\"eos_token\":\"</s>\",\"add_generation_prompt\":true,"
    "\"messages\":[{\"role\":\"system\",\"content\":\"S\"},{\"role\":\"user\",\"content\":[{\"type\":\"text\","
    "\"text\":\"a\"}]},{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"1\",\"type\":\"function\","
    "\"function\":{\"name\":\"f\",\"arguments\":{\"x\":1.5}}}]},{\"role\":\"tool\",\"content\":\"{}\"}],"
    "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":{\"type\":\"object\"}}}]}";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *src = (const char *)data;
    const char *nul = memchr(src, '\0', size);
    size_t tlen = nul ? (size_t)(nul - src) : size;
    json_t *ctx = nul ? json_loadb(nul + 1, size - tlen - 1, 0, NULL) : json_loads(CTX, 0, NULL);
    if (ctx && !json_is_object(ctx)) {
        json_decref(ctx);
        ctx = NULL;
    }
    nb_tmpl *t = NULL;
    if (nb_tmpl_parse(src, tlen, &t) == NB_OK) {
        nb_tmpl_opts o = {.now = 0, .max_output = 1u << 20, .max_memory = 64u << 20, .max_steps = 200000,
                          .max_ms = 2000};
        char *out = NULL;
        size_t n = 0;
        if (nb_tmpl_render(t, ctx, &o, &out, &n) == NB_OK) {
            if (!out || strlen(out) > n) __builtin_trap();
            free(out);
        } else if (out) {
            __builtin_trap();
        }
        (void)nb_tmpl_iterates_content(t);
        nb_tmpl_free(t);
    }
    json_decref(ctx);
    return 0;
}
