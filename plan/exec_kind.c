/* exec_kind.c: how the CUDA backend runs each op (include/h3/kernel.h): the one rule the
 * plan's writer (codegen emits kernels and library-call records by it) and its reader (the
 * cuda backend prepares ops by it) share; kernel names and C element types.
 */
#include "h3/kernel.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- classification ------------------------------------------------------------------ */
bool h3_exec_slice_is_contiguous(const h3_op *op) {
  /* the memory planner's rule (passes/memory_plan.c): every dim before the axis is 1 */
  const h3_type *t = &op->operands[0]->type;
  int64_t axis = h3_op_attr_int(op, "axis", 0);
  if (axis < 0 || axis >= t->rank) return false;
  for (int i = 0; i < axis; i++)
    if (t->dims[i] != 1) return false;
  return true;
}

h3_exec_kind h3_exec_classify(const h3_op *op) {
  switch (op->code) {
  case H3_OP_LOOP:
  case H3_OP_YIELD:
  case H3_OP_RETURN:
  case H3_OP_CALL:
  case H3_OP_BRANCH:
    return H3_EXEC_CONTROL;
  case H3_OP_RESHAPE:
  case H3_OP_INDEX:
    return H3_EXEC_VIEW;
  case H3_OP_SLICE:
    return h3_exec_slice_is_contiguous(op) ? H3_EXEC_VIEW : H3_EXEC_KERNEL;
  case H3_OP_LINEAR:
  case H3_OP_LINEAR_INT8: /* cuBLASLt int8 TN with the dequant epilogue (docs/int8.md) */
  case H3_OP_MATMUL_I8: /* cuBLASLt int8 TN into the int32 result (docs/int8.md) */
  case H3_OP_ATTENTION:
  case H3_OP_PAGED_ATTENTION:
    return H3_EXEC_LIBRARY;
  case H3_OP_SIGMA_SCHEDULE:
    return H3_EXEC_HOST;
  case H3_OP_BLOCK_ATTENTION:
  case H3_OP_INDEX_TOPK:
  case H3_OP_SPARSE_ATTENTION:
  case H3_OP_ROUTER_TOPK:
  case H3_OP_MOE:
  case H3_OP_MARKOV_DRAFT:
  case H3_OP_SPEC_ACCEPT:
  case H3_OP_SAGE_ATTENTION: /* cuda: runtime/cuda/cuda_sage.c */
  case H3_OP_SOL_ATTENTION:  /* cuda: runtime/cuda/cuda_sol.c */
  case H3_OP_LINEAR_NVFP4: /* cuda: runtime/cuda/cuda_nvfp4.c (docs/nvfp4.md) */
  case H3_OP_SHARD:       /* the ranks' ops: cpu threads, cuda through NCCL (docs/parallel.md) */
  case H3_OP_ALL_GATHER:
  case H3_OP_ALL_TO_ALL:
  case H3_OP_ALL_REDUCE:
    return H3_EXEC_DEFERRED;
  default:
    return H3_EXEC_KERNEL;
  }
}

const char *h3_exec_kind_name(h3_exec_kind k) {
  switch (k) {
  case H3_EXEC_CONTROL: return "control";
  case H3_EXEC_VIEW: return "view";
  case H3_EXEC_KERNEL: return "kernel";
  case H3_EXEC_LIBRARY: return "library";
  case H3_EXEC_HOST: return "host";
  case H3_EXEC_DEFERRED: return "deferred";
  }
  return "?";
}

const char *h3_exec_library_kind(const h3_op *op) {
  switch (h3_exec_classify(op)) {
  case H3_EXEC_LIBRARY:
    return op->code == H3_OP_LINEAR || op->code == H3_OP_LINEAR_INT8 || op->code == H3_OP_MATMUL_I8
               ? "cublaslt"
               : "attention";
  case H3_EXEC_HOST: return "host";
  case H3_EXEC_DEFERRED: return "deferred";
  default: return NULL;
  }
}

const char *h3_kernel_ctype(h3_dtype t) {
  switch (t) {
  case H3_BF16: return "h3_bf16";
  case H3_F16: return "h3_f16";
  case H3_F32: return "float";
  case H3_F64: return "double";
  case H3_I8: return "signed char";
  case H3_I32: return "int";
  case H3_I64: return "long long";
  case H3_U8: return "unsigned char";
  default: return "void";
  }
}

/* ---- kernels ---------------------------------------------------------------------------- */
bool h3_kernel_name_matches(const char *name, const char *op, const char *source) {
  char base[96];
  int n = snprintf(base, sizeof base, "h3_%s", op);
  if (n <= 0 || (size_t)n >= sizeof base - 12) return false;
  size_t bl = (size_t)n;
  if (strncmp(name, base, bl) != 0 || name[bl] != '_' || strlen(name) != bl + 11) return false;
  char *hashed = h3_str_replace_all(source, name, base);
  if (!hashed) return false;
  char hex[65];
  h3_sha256_hex(hashed, strlen(hashed), hex);
  free(hashed);
  return strncmp(hex, name + bl + 1, 10) == 0;
}

