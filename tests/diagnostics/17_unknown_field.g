model t
config tiny { dim = 4, n = 2 }
params blocks[n] {
  attn.qkv_proj.weight : f32[dim, dim]
}
graph g(x: f32[3, dim]) -> (y: f32[3, dim]) {
  repeat i in n { x = linear(x, blocks[i].attn.qkv.weight) }
  return x
}
