# minimax_h3.g: MiniMax-H3, the 33B audio+video diffusion transformer (DiT), in the h3 graph
# language. Facts and conventions: docs/models/minimax_h3.md (section numbers below refer to it).
#
# One request is one packed sequence of S rows: [ text L | audio Na | video Nv | padding ],
# S = ceil(used / 64) * 64. Graphs:
#   text    once per request: text-encoder states -> condition_proj -> refiner -> final_norm;
#   step    one DiT forward: embed, time embedding, RoPE tables, the `trunk` of `layers`
#           blocks (one loop region), final layer -> velocities of the video and audio rows;
#   sample  the program: text once, then `steps` Euler steps of the flow-matching sampler.
# The rounding chain is the spec's exact one (§4): every op rounds once to its result dtype,
# so bf16 tensors mean bf16 roundings; fp32 islands are written with f32 casts and weights.
# Every RMSNorm uses eps = 1e-5 (a float literal: config keys are integers).
model minimax_h3

# §1. `slots` is M, the distinct timesteps of a step (video slot 0, audio slot 1);
# `steps` is the number of step forwards of the sampler (50 sigma points -> 49 forwards).
config full {
  layers = 50         refiner_layers = 2
  dim = 5376          heads = 56          head_dim = 128      rope_dims = 96
  ffn = 14336
  time_freq = 256     time_hidden = 5376  time_embed = 2688
  text_dim = 5120     video_width = 96    audio_width = 32
  slots = 2
  text_rows = 88      audio_rows = 356    video_rows = 32256
  steps = 49
}

config tiny {
  layers = 2          refiner_layers = 1
  dim = 64            heads = 4           head_dim = 16       rope_dims = 12
  ffn = 96
  time_freq = 16      time_hidden = 64    time_embed = 32
  text_dim = 48       video_width = 12    audio_width = 8
  slots = 2
  text_rows = 8       audio_rows = 6      video_rows = 40
  steps = 49
}

# What every graph below relies on, checked against the chosen config and its --set overrides.
check steps >= 1, "steps is the sampler's forwards: at least 1"
check layers >= 1, "the trunk holds at least one block"
check slots >= 2, "a step has a timestep per slot, video slot 0 and audio slot 1 at least (§1)"
check slots <= 4, "at most 4 distinct timesteps per step (§1)"
check rope_dims % 6 == 0, "rope's dimensions split over 3 axes of cos / sin pairs: rope_dims a multiple of 6"
check rope_dims <= head_dim, "rope turns the first rope_dims of a head's head_dim"
check text_rows >= 1, "the packed sequence starts with the text rows: at least 1"
check audio_rows >= 1, "the audio rows' velocities are an output: at least 1"
check video_rows >= 1, "the video rows' velocities are an output: at least 1"

let used = text_rows + audio_rows + video_rows   # live rows of the packed sequence
let S = ceildiv(used, 64) * 64                    # packed rows (padding to a multiple of 64)
let pad_rows = S - used
let M = slots
let attn_width = heads * head_dim                 # 7168 in full (not dim)
let rope_half = rope_dims / 2                     # cos/sin table width
let rope_freqs = rope_dims / 6                    # inv_freq values per axis (3 axes)
let audio_start = text_rows                       # first audio row
let video_start = text_rows + audio_rows          # first video row
let sigma_points = steps + 1

# ---- §5 weights -------------------------------------------------------------------------------
# Random init: N(0, 1/fan_in) for linears, norm weights near 1, small biases, and AdaLN
# projections at std 0.1/sqrt(fan_in) (fan_in = 100 * K) so the gates are about 0.1.
param condition_proj.weight : bf16[dim, text_dim] init normal(fan_in = text_dim)
param condition_proj.bias   : bf16[dim]           init normal(std = 0.02)

params token_refiner.blocks[refiner_layers] as refiner {
  norm1.weight         : bf16[dim]                  init ones_plus_normal(std = 0.02)
  norm2.weight         : bf16[dim]                  init ones_plus_normal(std = 0.02)
  attn.qkv_proj.weight : bf16[3 * attn_width, dim]  init normal(fan_in = dim)
  attn.q_norm.weight   : bf16[head_dim]             init ones_plus_normal(std = 0.02)
  attn.k_norm.weight   : bf16[head_dim]             init ones_plus_normal(std = 0.02)
  attn.out_proj.weight : bf16[dim, attn_width]      init normal(fan_in = attn_width)
  mlp.fc1.weight       : bf16[2 * ffn, dim]         init normal(fan_in = dim)
  mlp.fc2.weight       : bf16[dim, ffn]             init normal(fan_in = ffn)
}

param final_norm.weight : bf16[dim] init ones_plus_normal(std = 0.02)

# fp32 island: patch embeddings, time embedder, RoPE frequencies, output projections.
param video_patch_proj.weight : f32[dim, video_width] init normal(fan_in = video_width)
param video_patch_proj.bias   : f32[dim]              init normal(std = 0.02)
param audio_patch_proj.weight : f32[dim, audio_width] init normal(fan_in = audio_width)
param audio_patch_proj.bias   : f32[dim]              init normal(std = 0.02)
param time_embedder.linear_1.weight : f32[time_hidden, time_freq]  init normal(fan_in = time_freq)
param time_embedder.linear_1.bias   : f32[time_hidden]             init normal(std = 0.02)
param time_embedder.linear_2.weight : f32[time_embed, time_hidden] init normal(fan_in = time_hidden)
param time_embedder.linear_2.bias   : f32[time_embed]              init normal(std = 0.02)
# inv_freq[j] = 10000^(-2j / (rope_dims/3)), the same for each of the 3 axes
param rope.inv_freq : f32[rope_freqs] init rope_inv_freq(theta = 10000.0, dims = rope_dims / 3)

params blocks[layers] {
  adaln_proj.weight    : bf16[18 * dim, time_embed] init normal(fan_in = 100 * time_embed)
  adaln_proj.bias      : bf16[18 * dim]             init normal(std = 0.05)
  norm1.weight         : bf16[dim]                  init ones_plus_normal(std = 0.02)
  norm2.weight         : bf16[dim]                  init ones_plus_normal(std = 0.02)
  attn.qkv_proj.weight : bf16[3 * attn_width, dim]  init normal(fan_in = dim)
  attn.q_norm.weight   : bf16[head_dim]             init ones_plus_normal(std = 0.02)
  attn.k_norm.weight   : bf16[head_dim]             init ones_plus_normal(std = 0.02)
  attn.out_proj.weight : bf16[dim, attn_width]      init normal(fan_in = attn_width)
  mlp.fc1.weight       : bf16[2 * ffn, dim]         init normal(fan_in = dim)
  mlp.fc2.weight       : bf16[dim, ffn]             init normal(fan_in = ffn)
}

param final_layer.adaln_proj.weight : bf16[2 * dim, time_embed] init normal(fan_in = 100 * time_embed)
param final_layer.adaln_proj.bias   : bf16[2 * dim]             init normal(std = 0.05)
param final_layer.norm.weight       : bf16[dim]                 init ones_plus_normal(std = 0.02)
param final_layer.video_out.weight  : f32[video_width, dim] init normal(fan_in = dim)
param final_layer.video_out.bias    : f32[video_width]      init normal(std = 0.02)
param final_layer.audio_out.weight  : f32[audio_width, dim] init normal(fan_in = dim)
param final_layer.audio_out.bias    : f32[audio_width]      init normal(std = 0.02)

# ---- §3.1 text refiner ------------------------------------------------------------------------
# x += attn(norm1(x)): qkv, per-head q/k RMSNorm, no RoPE, full attention over the L rows;
# x += mlp(norm2(x)) with SwiGLU g = bf16(silu(gate) * up) (one rounding). No AdaLN.
fn refiner_block(x: bf16[text_rows, dim], p: refiner) -> bf16[text_rows, dim] {
  h = rms_norm(x, p.norm1.weight, eps = 1e-5)                          # [L, dim] bf16
  q, k, v = split(linear(h, p.attn.qkv_proj.weight), 3, axis = 1)     # 3 x [L, attn_width]
  q = rms_norm(reshape(q, shape = [text_rows, heads, head_dim]), p.attn.q_norm.weight, eps = 1e-5)
  k = rms_norm(reshape(k, shape = [text_rows, heads, head_dim]), p.attn.k_norm.weight, eps = 1e-5)
  v = reshape(v, shape = [text_rows, heads, head_dim])
  o = attention(q, k, v, scale = 1.0 / sqrt(head_dim))                 # [L, heads, head_dim]
  x = x + linear(reshape(o, shape = [text_rows, attn_width]), p.attn.out_proj.weight)
  h = rms_norm(x, p.norm2.weight, eps = 1e-5)
  gate, up = split(linear(h, p.mlp.fc1.weight), 2, axis = 1)          # gate half first
  g = bf16(silu(f32(gate)) * f32(up))                                  # [L, ffn] bf16
  return x + linear(g, p.mlp.fc2.weight)
}

# ---- §4 one DiT block -------------------------------------------------------------------------
# a: [M, time_embed] AdaLN input; idx: [S] AdaLN table row (max(tag, 0) + 3 * slot);
# cos/sin: [S, rope_half] bf16 RoPE tables. Steps numbered as §4's table.
fn block(x: bf16[S, dim], p: blocks, a: bf16[M, time_embed], idx: i32[S],
         cos: bf16[S, rope_half], sin: bf16[S, rope_half]) -> bf16[S, dim] {
  # AdaLN tables: [M, 18*dim] viewed as [3M, 6*dim] (row 3*slot + modality), six [3M, dim]
  m = reshape(linear(a, p.adaln_proj.weight, p.adaln_proj.bias), shape = [3 * M, 6 * dim])
  shift_msa, scale_msa, gate_msa, shift_mlp, scale_mlp, gate_mlp = split(m, 6, axis = 1)

  # 1-2: norm1, modulate: bf16(bf16(h * bf16(1 + scale)) + shift)
  h = rms_norm(x, p.norm1.weight, eps = 1e-5)
  h = h * (1.0 + gather(scale_msa, idx)) + gather(shift_msa, idx)
  # 3-5: qkv [q_all | k_all | v_all], per-head q/k norm, RoPE on dims [0, rope_dims)
  q, k, v = split(linear(h, p.attn.qkv_proj.weight), 3, axis = 1)     # 3 x [S, attn_width]
  q = rms_norm(reshape(q, shape = [S, heads, head_dim]), p.attn.q_norm.weight, eps = 1e-5)
  k = rms_norm(reshape(k, shape = [S, heads, head_dim]), p.attn.k_norm.weight, eps = 1e-5)
  q = rope(q, cos, sin)
  k = rope(k, cos, sin)
  v = reshape(v, shape = [S, heads, head_dim])
  # 6: live rows [0, used) and padding rows [used, S) never attend to each other
  o = attention(q, k, v, scale = 1.0 / sqrt(head_dim), segments = [used])
  # 7-8: out_proj, gated residual bf16(x + bf16(gate * a))
  x = x + gather(gate_msa, idx) * linear(reshape(o, shape = [S, attn_width]), p.attn.out_proj.weight)
  # 9: norm2, modulate
  h = rms_norm(x, p.norm2.weight, eps = 1e-5)
  h = h * (1.0 + gather(scale_mlp, idx)) + gather(shift_mlp, idx)
  # 10-13: fc1, SwiGLU (one rounding), fc2, gated residual
  gate, up = split(linear(h, p.mlp.fc1.weight), 2, axis = 1)          # 2 x [S, ffn]
  g = bf16(silu(f32(gate)) * f32(up))
  return x + gather(gate_mlp, idx) * linear(g, p.mlp.fc2.weight)
}

# ---- graphs -----------------------------------------------------------------------------------
graph text(text_states: bf16[text_rows, text_dim]) -> (text: bf16[text_rows, dim]) {
  x = linear(text_states, condition_proj.weight, condition_proj.bias)  # [L, dim] bf16
  refine: repeat j in refiner_layers {
    x = refiner_block(x, refiner[j])
  }
  return rms_norm(x, final_norm.weight, eps = 1e-5)
}

# tag: video 0, text 1, audio 2, padding -1; slot: audio 1, all others 0; pos: (t, h, w).
graph step(text: bf16[text_rows, dim], video: f32[video_rows, video_width],
           audio: f32[audio_rows, audio_width], t: f32[M], tag: i32[S], slot: i32[S],
           pos: f32[S, 3])
    -> (v_video: f32[video_rows, video_width], v_audio: f32[audio_rows, audio_width]) {
  # 1. embed (fp32 math, fp32 weights, one rounding) and pack [text | audio | video | pad]
  ev = linear(video, video_patch_proj.weight, video_patch_proj.bias, dtype = bf16)
  ea = linear(audio, audio_patch_proj.weight, audio_patch_proj.bias, dtype = bf16)
  x = pad(concat(text, ea, ev, axis = 0), axis = 0, after = pad_rows)   # [S, dim] bf16

  # 2. time: temb = W2 silu(W1 e + b1) + b2 in fp32; a = bf16(silu(temb))
  e = timestep_embedding(t, dim = time_freq)                             # [M, time_freq] f32
  temb = linear(silu(linear(e, time_embedder.linear_1.weight, time_embedder.linear_1.bias)),
                time_embedder.linear_2.weight, time_embedder.linear_2.bias)
  a = bf16(silu(temb))                                                   # [M, time_embed]

  # 3. RoPE tables: angles [pos_t f, pos_h f, pos_w f], cos/sin rounded to bf16
  cos, sin = rope_table(pos, rope.inv_freq, dtype = bf16)                # [S, rope_half] each

  # 4. the block stack; idx = max(tag, 0) + 3 * slot (padding modulated as video)
  idx = max(tag, 0) + 3 * slot
  trunk: repeat i in layers {
    x = block(x, blocks[i], a, idx, cos, sin)
  }

  # 5. final layer on the audio and video rows (contiguous from audio_start): [shift, scale]
  #    of final_adaln(a), indexed by slot; as §3.5 writes it, the modulate is fp32 math on
  #    the bf16 norm output with ONE rounding: h = f32(bf16(n * (1 + scale) + shift))
  shift, scale = split(linear(a, final_layer.adaln_proj.weight, final_layer.adaln_proj.bias),
                       2, axis = 1)                                      # 2 x [M, dim]
  live = rows(x, audio_start, audio_rows + video_rows)
  live_slot = rows(slot, audio_start, audio_rows + video_rows)
  n = rms_norm(live, final_layer.norm.weight, eps = 1e-5)
  h = f32(bf16(f32(n) * (1.0 + f32(gather(scale, live_slot))) + f32(gather(shift, live_slot))))
  v_audio = linear(rows(h, 0, audio_rows), final_layer.audio_out.weight, final_layer.audio_out.bias)
  v_video = linear(rows(h, audio_rows, video_rows), final_layer.video_out.weight,
                   final_layer.video_out.bias)
  return v_video, v_audio
}

# §6: flow-matching Euler sampler, no guidance. sigma grids of `sigma_points` values (shift 12
# video, 3 audio); t = 1 - sigma (video -> slot 0, audio -> slot 1); x += (s_k - s_k+1) * v.
program sample(text_states: bf16[text_rows, text_dim], tag: i32[S], slot: i32[S], pos: f32[S, 3])
    -> (video: f32[video_rows, video_width], audio: f32[audio_rows, audio_width]) {
  cond = text(text_states)
  video = randn(shape = [video_rows, video_width], stream = "video")
  audio = randn(shape = [audio_rows, audio_width], stream = "audio")
  sigma_video = reshape(sigma_schedule(n = sigma_points, shift = 12.0), shape = [sigma_points, 1])
  sigma_audio = reshape(sigma_schedule(n = sigma_points, shift = 3.0), shape = [sigma_points, 1])
  sigmas = concat(sigma_video, sigma_audio, axis = 1)                    # [steps+1, 2] f32
  denoise: for k in steps {
    s_now = sigmas[k]                                                    # [2] f32
    s_next = sigmas[k + 1]
    v_video, v_audio = step(cond, video, audio, 1.0 - s_now, tag, slot, pos)
    ds = s_now - s_next
    video = video + slice(ds, axis = 0, start = 0, len = 1) * v_video
    audio = audio + slice(ds, axis = 0, start = 1, len = 1) * v_audio
  }
  return video, audio
}
