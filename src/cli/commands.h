/* The subcommands: one nb_cmd_<name>() per src/cli/cmd_<name>.c. */
#ifndef NB_CLI_COMMANDS_H
#define NB_CLI_COMMANDS_H

/* In the order of the workflow (plan -> quantize -> serve -> bench), then the tools. */
#define NB_COMMANDS(X)                                                                        \
    X(plan, "the memory account: weights, KV pool, concurrency per length")                 \
    X(quantize, "round-to-nearest quantization to GGUF, per-tensor report, --check quality") \
    X(serve, "OpenAI-compatible HTTP server: completions, chat, streaming, metrics")        \
    X(bench, "throughput: prompt processing, generation, decode roofline, concurrency")     \
    X(eval, "quality: perplexity, KL divergence vs a baseline, golden sets by bucket")      \
    X(gate, "accept or reject a candidate against its baseline (exit 0 / 1)")              \
    X(generate, "generate text from a prompt (default: the built-in model)")                \
    X(perplexity, "perplexity of a model over a text file (llama-perplexity's procedure)")  \
    X(logits, "teacher-forced top-K logits per position, as JSON lines")                    \
    X(tokenize, "show how a model's tokenizer splits a text")                               \
    X(template, "render a chat template with a JSON context (debugging templates)")       \
    X(inspect, "architecture, parameters, dtypes, metadata of a model file")                \
    X(export, "write a model as a Hugging Face checkpoint (AWQ/GPTQ/compressed-tensors/NF4)") \
    X(synth, "write a deterministic random-weight model of any shape")                      \
    X(imatrix, "llama.cpp-compatible importance matrix of a model over a text")

#define X(name, help) int nb_cmd_##name(int argc, char **argv);
NB_COMMANDS(X)
#undef X

/* `nibble eval <sub>`: one file each (cmd_eval_<sub>.c), dispatched by cmd_eval.c. */
int nb_cmd_eval_ppl(int argc, char **argv);
int nb_cmd_eval_kld(int argc, char **argv);
int nb_cmd_eval_golden(int argc, char **argv);
/* `nibble quantize ... --format hf` (cmd_export.c): GGUF just written -> HF directory. */
int nb_cmd_export_quantized(const char *gguf, const char *in, const char *dir, const char *layout, const char *tokenizer);
/* The output rule for an HF directory (nb_out_dir_check): prints the refusal as `cmd`, returns 0 or 2. */
int nb_cmd_export_check_out(const char *cmd, const char *dir, const char *in, const char *tokenizer, int force,
                            const char *what);

/* `nibble bench serve|compare`: cmd_bench_serve.c, dispatched by cmd_bench.c. */
int nb_cmd_bench_serve(int argc, char **argv);
int nb_cmd_bench_compare(int argc, char **argv);

#endif
