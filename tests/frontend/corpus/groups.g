model groups
config tiny { layers = 5, first = 2, e = 4, h = 8 }
params layers[0 .. first] as dense {
  norm.weight : bf16[h]
}
params layers[first .. layers] as sparse {
  norm.weight : bf16[h]
  mlp.experts[e].w : bf16[2 * h, h] init uniform(fan_in = 16)
}
param dspark.layers.0.w : f32[h] init const(value = -1.5)
graph g(x: bf16[3, h]) -> (y: bf16[3, h], w: bf16[16, 8]) {
  y = rms_norm(x, dense[1].norm.weight, eps = 1e-5)
  repeat j in layers - first { y = rms_norm(y, sparse[j].norm.weight, eps = 1e-5) }
  return y, sparse[2].mlp.experts[3].w
}
