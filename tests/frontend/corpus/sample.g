model sample
config full { layers = 3, dim = 8, ffn = 12 }
config tiny { layers = 1, dim = 4, ffn = 6 }
let half = dim / 2
params blocks[layers] {
  norm.weight : bf16[dim] init ones_plus_normal(std = 0.02)
  fc.weight : bf16[2 * ffn, dim]
  out.weight : bf16[dim, ffn]
}
param head.weight : f32[half, dim]
fn block(x: bf16[S, dim], p: blocks) -> bf16[S, dim] {
  h = rms_norm(x, p.norm.weight, eps = 1e-5)
  gate, up = split(linear(h, p.fc.weight), 2)
  return x + linear(bf16(silu(f32(gate)) * f32(up)), p.out.weight)
}
graph step(x: bf16[5, dim], t: f32[2]) -> (y: f32[5, half]) {
  trunk: repeat i in layers { x = block(x, blocks[i]) }
  return linear(f32(x), head.weight) * 2.0
}
program run(x: bf16[5, dim]) -> (y: f32[5, half]) {
  y = step(x, zeros(f32, [2]))
  for k in 3 { y = y + step(x, full(f32, [2], value = 1.0)) }
  return y
}
