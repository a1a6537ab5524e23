model c
config a { n = 2, d = 8 }
config b { n = 0, d = 8 }
check n >= 1, "n at least 1"
check d % n == 0, "d a multiple of n"
check d / n <= d, "never false"
check n != 3, "n is not 3"
check n < d, "fewer than d"
check d > n, "more than n"
let w = d / n
graph g(x: f32[d]) -> (y: f32[d]) {
  return x
}
