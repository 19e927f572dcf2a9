/* The driver of calibrated quantization for `nibble quantize` (--imatrix,
 * --method gptq|awq|smoothquant): it loads the model and tokenizer, runs the
 * calibration samples through the serving forward pass block by block with
 * capture hooks (model/forward.h), quantizes each block from its statistics
 * (quant/gptq.h, ...), feeds the quantized block's output to the next, and
 * hands the results to the RTN writer through nb_rtn_params' tensor_fn /
 * meta_fn (quant/rtn.h). */
#ifndef NB_CLI_QUANTIZE_CALIB_H
#define NB_CLI_QUANTIZE_CALIB_H

#include "quant/calib.h"
#include "quant/rtn.h"

typedef struct nb_qcal nb_qcal;

/* Prepares everything before the output is written (all calibration work
 * happens here) and points p's hooks at the result. quiet: no progress. */
nb_status nb_qcal_prepare(const nb_calib_opts *o, const char *in, const char *imatrix_path, bool quiet,
                          nb_rtn_params *p, nb_qcal **out) __attribute__((warn_unused_result));
void nb_qcal_free(nb_qcal *q);

#endif
