/* Identity of a model in evaluation reports: {path, sha256, type}.
 *   path    as the session opened it (the built-in default model's cache path
 *           when no model was named);
 *   sha256  of the file's bytes; for a directory (Hugging Face checkpoint),
 *           the SHA-256 of the text made of one line "<name>\t<sha256>\n" per
 *           regular file directly in it (names sorted bytewise, hidden files
 *           skipped) - it changes when any file changes;
 *   type    the source format the loader detected: "gguf", "safetensors"
 *           (HF directory or single .safetensors) or "llama2c". */
#ifndef NB_EVAL_MODEL_ID_H
#define NB_EVAL_MODEL_ID_H

#include <jansson.h>

#include "engine/session.h"

typedef struct nb_model_id {
    char path[4096];
    char sha256[65];
    char type[16];
} nb_model_id;

nb_status nb_model_id_of(const nb_session *s, nb_model_id *out) __attribute__((warn_unused_result));
/* SHA-256 of a file or directory as above. */
nb_status nb_model_id_sha256(const char *path, char hex[65]) __attribute__((warn_unused_result));
/* {"path":..., "sha256":..., "type":...} (new reference). */
json_t *nb_model_id_json(const nb_model_id *id);

#endif
