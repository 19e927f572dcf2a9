/* nb_vocab -> GGUF tokenizer metadata (the keys vocab_gguf.c reads), so that
 * files written from a source without GGUF metadata (llama2.c checkpoints, HF
 * directories) carry their tokenizer. */
#ifndef NB_FORMATS_VOCAB_GGUF_WRITE_H
#define NB_FORMATS_VOCAB_GGUF_WRITE_H

#include "formats/gguf.h"
#include "formats/vocab.h"

nb_status nb_vocab_to_gguf(const nb_vocab *v, nb_gguf_writer *w) __attribute__((warn_unused_result));

#endif
