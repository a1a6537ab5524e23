# safetensors' reserved metadata key as a parameter name (the weights file could not hold it)
model t
config c { d = 4 }
param __metadata__ : f32[d] init uniform(bound = 1.0)
graph g(x: f32[d]) -> (y: f32[d]) {
  return x
}
