/* libFuzzer target for Hugging Face config.json text, as two readers see it:
 * the model loader (nb_hfconfig_parse: architecture fields, rope_scaling,
 * quantization_config parsed into its layout) and the planner
 * (nb_plan_model_from_hf_json: text_config nesting, MoE / MLA fields and
 * quantization_config -> a weight scheme). Any input must give NB_OK or an
 * error with a message, never a crash, a sanitizer report or a leak. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "formats/hfconfig.h"
#include "plan/plan.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    nb_hf_config hc;
    nb_status st = nb_hfconfig_parse((const char *)data, size, "fuzz/config.json", &hc);
    if (st == NB_OK && (hc.hp.n_embd <= 0 || hc.hp.n_layer <= 0)) __builtin_trap(); /* accepted means valid */
    if (st == NB_OK) nb_hfconfig_free(&hc);
    nb_plan_config pc;
    nb_plan_config_init(&pc);
    (void)nb_plan_model_from_hf_json((const char *)data, size, "fuzz/config.json", &pc);
    nb_plan_config_free(&pc);
    return 0;
}
