model errors
config tiny { dim = 4 }
config full { dim = 8, extra = 1 }
graph g(x: bf16[3, dim]) -> (y: bf16[3, dim]) {
  h = rms_norm(x, dmi)
  a = (x +
  b = linear(x, w, eps = 3)
  return b
}
