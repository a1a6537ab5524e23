/* weights_internal.h: what the weight store's files share (weights.c, weights_file.c,
 * weights_nvfp4.c) and include/h3/weights.h does not show.
 */
#ifndef H3_WEIGHTS_INTERNAL_H
#define H3_WEIGHTS_INTERNAL_H

#include "h3/safetensors.h"
#include "h3/weights.h"

/* Fills elements `at` .. at + n - 1 of one tensor of parameter p (its init and dtype) from
 * the Philox stream `stream`, element `at` going to index `first` of dst; tmp holds 4096
 * floats (weights.c). */
void h3_weights_fill_random(const h3_param *p, uint64_t seed, uint32_t stream, void *dst,
                            size_t first, size_t at, size_t n, float *tmp);

/* Checks one file tensor against the expected type; reports "PATH: WHAT 'NAME': ..." with
 * the hint. An F8_E4M3 tensor passes for a U8 type only when e4m3_ok (weights_file.c). */
h3_status h3_weights_check_tensor(const char *path, const char *what, const char *name,
                                  const h3_st_tensor *t, const h3_type *want, bool e4m3_ok,
                                  const char *hint, h3_diag *d);

/* ---- NVFP4 parameters (weights_nvfp4.c; h3_param.quant, include/h3/nvfp4.h) -------------- */
/* Makes every NVFP4 parameter of w from the random bf16 weight it stands for: the bits the
 * bf16 parameter would get from `seed` (its name's stream, its init), quantized. */
h3_status h3_weights_nvfp4_random(h3_weights *w, uint64_t seed, h3_diag *d);

/* Tensor k of the NVFP4 parameters of packed parameter w->w[i] (quant NVFP4_PACKED; its
 * scale and global siblings are filled too) from file st: its three tensors when the file
 * has them (scale U8 or F8_E4M3), else the quantization of the bf16 weight's tensor. Marks
 * the tensors read in used[]. Returns 1 when filled, 0 when the file has none of them
 * (*missing = the name to report), -1 after reporting. */
int h3_weights_nvfp4_load(h3_weights *w, int i, int64_t k, const h3_safetensors *st,
                          const char *path, char *used, h3_strbuf *missing, const char *hint,
                          h3_diag *d);

#endif
