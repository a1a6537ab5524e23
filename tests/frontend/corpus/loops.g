model loops
config tiny { n = 5, d = 6, layers = 2 }
let half = d / 2
let eps = 1e-6
graph g(x: bf16[4, d], s: f32[n, 2]) -> (y: bf16[4, d], z: f32[2]) {
  acc = zeros(f32, [2])
  loop1: repeat k in n - 1 {
    t = s[k + 1] - s[k]
    acc = acc + t * 2
    x = bf16(f32(x) * 0.5)
  }
  a, b = split(x, 2, axis = -1)
  return x, acc
}
