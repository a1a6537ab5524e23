# float literals past double's range (they would silently become infinities)
model t
config c { d = 4 }
param w : f32[d] init uniform(bound = 1e999)
graph g(x: f32[d]) -> (y: f32[d]) {
  return x * 2.5e400
}
