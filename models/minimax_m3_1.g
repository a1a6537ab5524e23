# minimax_m3_1.g: MiniMax-M3.1, the 426B MoE language model with sparse "MSA" attention, and
# its DSpark speculative draft, in the h3 graph language. Facts and conventions:
# docs/models/minimax_m3_1.md (section numbers below refer to it).
#
# Graphs (one sequence; T rows at positions pos0 .. pos0+T-1):
#   prefill       T = prompt_len new tokens: writes K/V/IK caches, last-row fp32 logits,
#                 captured hidden states (draft context);
#   decode        one token;
#   verify        gamma+1 rows [bonus, d1..dgamma] = an extend; logits of every row;
#   draft         DSpark draft (§5.3 steps 1-4): block attention + Markov head, greedy;
#   draft_commit  §5.3 step 7: draft K/V of the verify rows from the captured states;
#   draft_prefill the same for the prompt rows after prefill;
#   generate      the program: prefill_seq of sequence 0, then greedy decode of max_new_tokens
#                 tokens;
#   serve_prefill, serve_decode, serve_mixed  the serving engine's chunk of a prompt, its
#                 batched decode step, and both in one pass; serve_prefill_group: the chunks
#                 of prefill_group prompts in one pass.
# Caches are graph inputs and outputs (kv_write returns the new cache). The page table of the
# sequence maps logical page p to physical page p + 1 (page 0 is reserved); it is computed in
# the graph. Numerics (§4.1): bf16 activations, one rounding per op, Gemma RMSNorm
# x * rsqrt(mean(x^2) + 1e-6) * (1 + w), fp32 router and logits. Float constants of the model
# (eps 1e-6, swiglu alpha 1.702 / limit 7.0, routed scaling 2.0) are the same in every config
# and are written as literals (config keys are integers).
model minimax_m3_1

# §2. `page` is the KV page size, equal to the sparse block (`sparse_block`); capture0..2
# are the target layers whose outputs feed the draft; prompt_len and max_new_tokens size the
# prefill graph and the generate programs; `seqs` is the number of sequences the caches hold
# and the rows of the batched graphs (decode_batch, generate_batch); prefill_group the prompts
# of serve_prefill_group (the engine uses it from 2 on).
config full {
  n_layers = 60       n_dense = 3
  dim = 6144          heads = 64          kv_heads = 4        head_dim = 128
  rope_dims = 64      rope_theta = 5000000
  mlp_ffn = 12288
  experts = 128       top_k = 4           expert_ffn = 3072   shared_ffn = 3072
  vocab = 200064
  index_heads = 4     index_dim = 128
  sparse_block = 128  topk_blocks = 16    page = 128
  max_ctx = 1048576
  gamma = 8           draft_ffn = 12288
  capture0 = 1        capture1 = 30       capture2 = 58
  markov_rank = 256   mask_id = 200063
  prompt_len = 2048   max_new_tokens = 256
  seqs = 1           prefill_group = 1
}

config small {
  n_layers = 4        n_dense = 1
  dim = 6144          heads = 64          kv_heads = 4        head_dim = 128
  rope_dims = 64      rope_theta = 5000000
  mlp_ffn = 12288
  experts = 32        top_k = 4           expert_ffn = 3072   shared_ffn = 3072
  vocab = 200064
  index_heads = 4     index_dim = 128
  sparse_block = 128  topk_blocks = 16    page = 128
  max_ctx = 16384
  gamma = 8           draft_ffn = 12288
  capture0 = 0        capture1 = 1        capture2 = 2
  markov_rank = 256   mask_id = 200063
  prompt_len = 2048   max_new_tokens = 256
  seqs = 1           prefill_group = 1
}

config tiny {
  n_layers = 3        n_dense = 1
  dim = 64            heads = 4           kv_heads = 2        head_dim = 16
  rope_dims = 8       rope_theta = 5000000
  mlp_ffn = 128
  experts = 8         top_k = 2           expert_ffn = 32     shared_ffn = 32
  vocab = 256
  index_heads = 2     index_dim = 16
  sparse_block = 8    topk_blocks = 2     page = 8
  max_ctx = 256
  gamma = 4           draft_ffn = 128
  capture0 = 0        capture1 = 1        capture2 = 2
  markov_rank = 8     mask_id = 255
  prompt_len = 20     max_new_tokens = 32
  seqs = 1           prefill_group = 1
}

# What every graph below relies on, checked against the chosen config and its --set overrides.
check n_dense >= 1, "the first layers are dense (§2): n_dense at least 1"
check n_dense < n_layers, "at least one sparse layer follows the dense ones: n_dense below n_layers"
check kv_heads >= 1, "kv_heads at least 1"
check heads % kv_heads == 0, "grouped-query attention: heads a multiple of kv_heads"
check rope_dims <= head_dim, "rope turns the first rope_dims of a head's head_dim"
check top_k <= experts, "the router chooses top_k of the experts: top_k at most experts"
check page == sparse_block, "a KV page is one sparse-attention block (§2): set page and sparse_block alike"
check topk_blocks >= 1, "the indexer selects topk_blocks blocks: at least 1"
check mask_id < vocab, "mask_id is a token id: below vocab"
check capture2 < n_layers, "the draft reads layers capture0..2: below n_layers"
check seqs >= 1, "seqs is the sequences the caches hold and the batched graphs' rows: at least 1"
check prefill_group >= 1, "prefill_group is the prompts of serve_prefill_group: at least 1"
check prompt_len >= 1, "prompt_len is the prefill's rows: at least 1"
check prompt_len <= max_ctx, "a prompt (a prefill chunk) must fit the context: raise max_ctx or lower prompt_len"
check max_new_tokens >= 1, "max_new_tokens is generate's tokens: at least 1"

let n_sparse = n_layers - n_dense
let q_width = heads * head_dim
let kv_width = kv_heads * head_dim
let qkv_width = q_width + 2 * kv_width
let rope_half = rope_dims / 2
let pt_len = ceildiv(max_ctx + 16, page)   # page-table entries of one sequence
let pages = seqs * pt_len + 1              # physical pages per cache (page 0 reserved)
let verify_rows = gamma + 1
let spec_rows = seqs * verify_rows         # serve_verify: verify_rows rows of each of seqs sequences
let group_rows = prefill_group * prompt_len # serve_prefill_group: prompt_len rows of each prompt

# ---- §3 target weights --------------------------------------------------------------------------
# Random init (§2): matrices U(-1/sqrt(in), 1/sqrt(in)), norm weights (the w of 1 + w)
# U(-0.1, 0.1), correction_bias U(-0.01, 0.01).
param embed_tokens.weight : bf16[vocab, dim] init uniform(fan_in = dim)
param lm_head.weight      : bf16[vocab, dim] init uniform(fan_in = dim)
param norm.weight         : bf16[dim]        init uniform(bound = 0.1)

params layers[0 .. n_dense] as dense {
  input_layernorm.weight          : bf16[dim]              init uniform(bound = 0.1)
  post_attention_layernorm.weight : bf16[dim]              init uniform(bound = 0.1)
  self_attn.qkv_proj.weight       : bf16[qkv_width, dim]   init uniform(fan_in = dim)
  self_attn.o_proj.weight         : bf16[dim, q_width]     init uniform(fan_in = q_width)
  self_attn.q_norm.weight         : bf16[head_dim]         init uniform(bound = 0.1)
  self_attn.k_norm.weight         : bf16[head_dim]         init uniform(bound = 0.1)
  mlp.gate_up_proj.weight         : bf16[2 * mlp_ffn, dim] init uniform(fan_in = dim)
  mlp.down_proj.weight            : bf16[dim, mlp_ffn]     init uniform(fan_in = mlp_ffn)
}

params layers[n_dense .. n_layers] as sparse {
  input_layernorm.weight            : bf16[dim]                          init uniform(bound = 0.1)
  post_attention_layernorm.weight   : bf16[dim]                          init uniform(bound = 0.1)
  self_attn.qkv_proj.weight         : bf16[qkv_width, dim]               init uniform(fan_in = dim)
  self_attn.o_proj.weight           : bf16[dim, q_width]                 init uniform(fan_in = q_width)
  self_attn.q_norm.weight           : bf16[head_dim]                     init uniform(bound = 0.1)
  self_attn.k_norm.weight           : bf16[head_dim]                     init uniform(bound = 0.1)
  self_attn.indexer.q_proj.weight   : bf16[index_heads * index_dim, dim] init uniform(fan_in = dim)
  self_attn.indexer.k_proj.weight   : bf16[index_dim, dim]               init uniform(fan_in = dim)
  self_attn.indexer.q_norm.weight   : bf16[index_dim]                    init uniform(bound = 0.1)
  self_attn.indexer.k_norm.weight   : bf16[index_dim]                    init uniform(bound = 0.1)
  mlp.router.weight                 : f32[experts, dim]                  init uniform(fan_in = dim)
  mlp.router.correction_bias        : f32[experts]                       init uniform(bound = 0.01)
  mlp.experts[experts].gate_up_proj.weight : bf16[2 * expert_ffn, dim]   init uniform(fan_in = dim)
  mlp.experts[experts].down_proj.weight    : bf16[dim, expert_ffn]       init uniform(fan_in = expert_ffn)
  mlp.shared_expert.gate_up_proj.weight    : bf16[2 * shared_ffn, dim]   init uniform(fan_in = dim)
  mlp.shared_expert.down_proj.weight       : bf16[dim, shared_ffn]       init uniform(fan_in = shared_ffn)
}

# ---- §5.4 draft weights (bf16 run) --------------------------------------------------------------
param dspark.fc.weight          : bf16[dim, 3 * dim] init uniform(fan_in = 3 * dim)
param dspark.hidden_norm.weight : bf16[dim]          init uniform(bound = 0.1)

params dspark.layers[1] as draft_layer {
  input_layernorm.weight          : bf16[dim]                init uniform(bound = 0.1)
  post_attention_layernorm.weight : bf16[dim]                init uniform(bound = 0.1)
  self_attn.qkv_proj.weight       : bf16[qkv_width, dim]     init uniform(fan_in = dim)
  self_attn.q_norm.weight         : bf16[head_dim]           init uniform(bound = 0.1)
  self_attn.k_norm.weight         : bf16[head_dim]           init uniform(bound = 0.1)
  self_attn.o_proj.weight         : bf16[dim, q_width]       init uniform(fan_in = q_width)
  mlp.gate_up_proj.weight         : bf16[2 * draft_ffn, dim] init uniform(fan_in = dim)
  mlp.down_proj.weight            : bf16[dim, draft_ffn]     init uniform(fan_in = draft_ffn)
}

param dspark.norm.weight      : bf16[dim]                init uniform(bound = 0.1)
param dspark.markov.w1.weight : bf16[vocab, markov_rank] init uniform(fan_in = markov_rank)
param dspark.markov.w2.weight : bf16[vocab, markov_rank] init uniform(fan_in = markov_rank)

# ---- building blocks ----------------------------------------------------------------------------
# Physical KV slot of each row's position: table[pos / page] * page + pos % page, table = the
# row's page table: pt has R tables, R dividing T: row t reads table t / (T / R) (R = 1: one
# for every row; R = T: one per row; between: R sequences of T / R consecutive rows).
fn kv_slots(T: int, R: int, pos: i32[T], pt: i32[R, pt_len]) -> i32[T] {
  return gather(reshape(pt, shape = [R * pt_len]), iota(n = T) / (T / R) * pt_len + pos / page) * page + pos % page
}

# The page table of sequence s: its logical page p is physical page s * pt_len + p + 1 (the
# single-sequence graphs use sequence 0).
fn seq_table(s: i32[]) -> i32[1, pt_len] {
  return reshape(iota(n = pt_len) + (s * pt_len + 1), shape = [1, pt_len])
}
fn seq0_table() -> i32[1, pt_len] {
  return reshape(iota(n = pt_len) + 1, shape = [1, pt_len])
}

# NORM_HEAD then ROPE (§4.1) of n heads of width D: x [T, n*D] -> [T, n, D] bf16.
fn norm_rope(T: int, n: int, D: int, x: bf16[T, n * D], w: bf16[D],
             cos: f32[T, rope_half], sin: f32[T, rope_half]) -> bf16[T, n, D] {
  return rope(rms_norm(reshape(x, shape = [T, n, D]), w, eps = 1e-6, offset = 1.0), cos, sin)
}

# Dense swigluoai MLP of width F: u = [gate | up]; g = min(gate, 7); u' = clamp(up, -7, 7);
# out = bf16(g * sigmoid(1.702 g) * (u' + 1)) in fp32 with one rounding; then down_proj.
fn mlp(T: int, F: int, h: bf16[T, dim], gate_up: bf16[2 * F, dim], down: bf16[dim, F])
    -> bf16[T, dim] {
  gate, up = split(linear(h, gate_up), 2, axis = 1)                    # 2 x [T, F] bf16
  g = clamp(f32(gate), hi = 7.0)
  u = clamp(f32(up), lo = -7.0, hi = 7.0)
  return linear(bf16(g * sigmoid(g * 1.702) * (u + 1.0)), down)
}

# q, k, v of one attention layer after q/k NORM_HEAD + ROPE (v as is).
fn qkv_heads(T: int, h: bf16[T, dim], w: bf16[qkv_width, dim], q_norm: bf16[head_dim],
             k_norm: bf16[head_dim], cos: f32[T, rope_half], sin: f32[T, rope_half])
    -> (bf16[T, heads, head_dim], bf16[T, kv_heads, head_dim], bf16[T, kv_heads, head_dim]) {
  qkv = linear(h, w)                                                   # [T, qkv_width]
  q = norm_rope(T, heads, head_dim, slice(qkv, axis = 1, start = 0, len = q_width), q_norm, cos, sin)
  k = norm_rope(T, kv_heads, head_dim, slice(qkv, axis = 1, start = q_width, len = kv_width),
                k_norm, cos, sin)
  v = reshape(slice(qkv, axis = 1, start = q_width + kv_width, len = kv_width),
              shape = [T, kv_heads, head_dim])
  return q, k, v
}

# A layer in three parts, so that one layer can run rows of different kinds (§4.2): its input
# part (steps 1-5: norm, projections, NORM_HEAD + ROPE, the new K / V / IK written at the rows'
# slots), its attention over the cache (steps 6-7), its output part (steps 8-13).
# Dense layer (§4.2 "Dense layer"): causal paged attention over the cache, dense MLP.
fn dense_attn_in(T: int, x: bf16[T, dim], p: dense,
                 kc: bf16[pages, page, kv_heads, head_dim], vc: bf16[pages, page, kv_heads, head_dim],
                 slot: i32[T], cos: f32[T, rope_half], sin: f32[T, rope_half])
    -> (bf16[T, heads, head_dim], bf16[pages, page, kv_heads, head_dim],
        bf16[pages, page, kv_heads, head_dim]) {
  h = rms_norm(x, p.input_layernorm.weight, eps = 1e-6, offset = 1.0)
  q, k, v = qkv_heads(T, h, p.self_attn.qkv_proj.weight, p.self_attn.q_norm.weight,
                      p.self_attn.k_norm.weight, cos, sin)
  return q, kv_write(kc, k, slot), kv_write(vc, v, slot)                 # before attention
}

fn dense_attn(T: int, R: int, q: bf16[T, heads, head_dim],
              kc: bf16[pages, page, kv_heads, head_dim], vc: bf16[pages, page, kv_heads, head_dim],
              pos: i32[T], pt: i32[R, pt_len]) -> bf16[T, heads, head_dim] {
  return paged_attention(q, kc, vc, pos, pt, scale = 1.0 / sqrt(head_dim), page = page)
}

fn dense_layer_out(T: int, x: bf16[T, dim], o: bf16[T, heads, head_dim], p: dense) -> bf16[T, dim] {
  x = x + linear(reshape(o, shape = [T, q_width]), p.self_attn.o_proj.weight)
  h = rms_norm(x, p.post_attention_layernorm.weight, eps = 1e-6, offset = 1.0)
  return x + mlp(T, mlp_ffn, h, p.mlp.gate_up_proj.weight, p.mlp.down_proj.weight)
}

fn dense_layer(T: int, R: int, x: bf16[T, dim], p: dense,
               kc: bf16[pages, page, kv_heads, head_dim], vc: bf16[pages, page, kv_heads, head_dim],
               pos: i32[T], slot: i32[T], pt: i32[R, pt_len],
               cos: f32[T, rope_half], sin: f32[T, rope_half])
    -> (bf16[T, dim], bf16[pages, page, kv_heads, head_dim], bf16[pages, page, kv_heads, head_dim]) {
  q, kc, vc = dense_attn_in(T, x, p, kc, vc, slot, cos, sin)
  return dense_layer_out(T, x, dense_attn(T, R, q, kc, vc, pos, pt), p), kc, vc
}

# Sparse layer (§4.2 steps 1-13): indexer top-k blocks, sparse attention, routed MoE plus the
# shared expert; moe = bf16(sum_e w_e * fp32(y_e) + fp32(y_shared)).
fn sparse_attn_in(T: int, x: bf16[T, dim], p: sparse,
                  kc: bf16[pages, page, kv_heads, head_dim], vc: bf16[pages, page, kv_heads, head_dim],
                  ikc: bf16[pages, page, index_dim], slot: i32[T],
                  cos: f32[T, rope_half], sin: f32[T, rope_half])
    -> (bf16[T, heads, head_dim], bf16[T, index_heads, index_dim],
        bf16[pages, page, kv_heads, head_dim], bf16[pages, page, kv_heads, head_dim],
        bf16[pages, page, index_dim]) {
  h = rms_norm(x, p.input_layernorm.weight, eps = 1e-6, offset = 1.0)            # 1
  q, k, v = qkv_heads(T, h, p.self_attn.qkv_proj.weight, p.self_attn.q_norm.weight,
                      p.self_attn.k_norm.weight, cos, sin)                        # 2, 4
  iq = norm_rope(T, index_heads, index_dim, linear(h, p.self_attn.indexer.q_proj.weight),
                 p.self_attn.indexer.q_norm.weight, cos, sin)                     # 3, 4
  ik = norm_rope(T, 1, index_dim, linear(h, p.self_attn.indexer.k_proj.weight),
                 p.self_attn.indexer.k_norm.weight, cos, sin)
  kc = kv_write(kc, k, slot)                                                      # 5
  vc = kv_write(vc, v, slot)
  return q, iq, kc, vc, kv_write(ikc, reshape(ik, shape = [T, index_dim]), slot)
}

fn sparse_attn(T: int, R: int, q: bf16[T, heads, head_dim], iq: bf16[T, index_heads, index_dim],
               kc: bf16[pages, page, kv_heads, head_dim], vc: bf16[pages, page, kv_heads, head_dim],
               ikc: bf16[pages, page, index_dim], pos: i32[T], pt: i32[R, pt_len])
    -> bf16[T, heads, head_dim] {
  sel = index_topk(iq, ikc, pos, pt, block = sparse_block, topk = topk_blocks)    # 6
  return sparse_attention(q, kc, vc, sel, pos, pt, scale = 1.0 / sqrt(head_dim), page = page)
}

fn sparse_layer_out(T: int, x: bf16[T, dim], o: bf16[T, heads, head_dim], p: sparse)
    -> bf16[T, dim] {
  x = x + linear(reshape(o, shape = [T, q_width]), p.self_attn.o_proj.weight)     # 8
  h = rms_norm(x, p.post_attention_layernorm.weight, eps = 1e-6, offset = 1.0)   # 9
  ids, w = router_topk(h, p.mlp.router.weight, p.mlp.router.correction_bias,
                       k = top_k, scale = 2.0)                                    # 10
  y = moe(h, p.mlp.experts.gate_up_proj.weight, p.mlp.experts.down_proj.weight, ids, w,
          alpha = 1.702, limit = 7.0)                                             # 11, f32
  y_shared = mlp(T, shared_ffn, h, p.mlp.shared_expert.gate_up_proj.weight,
                 p.mlp.shared_expert.down_proj.weight)                            # 12
  return x + bf16(y + f32(y_shared))                                              # 13
}

fn sparse_layer(T: int, R: int, x: bf16[T, dim], p: sparse,
                kc: bf16[pages, page, kv_heads, head_dim], vc: bf16[pages, page, kv_heads, head_dim],
                ikc: bf16[pages, page, index_dim],
                pos: i32[T], slot: i32[T], pt: i32[R, pt_len],
                cos: f32[T, rope_half], sin: f32[T, rope_half])
    -> (bf16[T, dim], bf16[pages, page, kv_heads, head_dim], bf16[pages, page, kv_heads, head_dim],
        bf16[pages, page, index_dim]) {
  q, iq, kc, vc, ikc = sparse_attn_in(T, x, p, kc, vc, ikc, slot, cos, sin)
  return sparse_layer_out(T, x, sparse_attn(T, R, q, iq, kc, vc, ikc, pos, pt), p), kc, vc, ikc
}

# The last sparse layer for N of its T rows (rows [N]: the rows whose output is read, e.g. a
# prompt's last row): steps 1-5 for all T rows as far as the caches need them (norm, the k / v
# rows of qkv_proj and the indexer's k, their NORM_HEAD + ROPE, the writes), q and the
# indexer's q and steps 6-13 for the N rows only, row n at position pos_n[n] of the sequence
# whose table is pt_n[RN == 1 ? 0 : n]. Returns x [N, dim] and the caches. Every op computes
# a row from that row alone (§4.1), so the N rows are those of sparse_layer over all T rows.
# q is a slice of its own linear (all of it), as qkv_heads' slices of qkv: --gpus splits it
# by heads the same way.
fn sparse_layer_rows(T: int, N: int, RN: int, x: bf16[T, dim], rows: i32[N], p: sparse,
                     kc: bf16[pages, page, kv_heads, head_dim],
                     vc: bf16[pages, page, kv_heads, head_dim], ikc: bf16[pages, page, index_dim],
                     slot: i32[T], cos: f32[T, rope_half], sin: f32[T, rope_half],
                     pos_n: i32[N], pt_n: i32[RN, pt_len])
    -> (bf16[N, dim], bf16[pages, page, kv_heads, head_dim], bf16[pages, page, kv_heads, head_dim],
        bf16[pages, page, index_dim]) {
  h = rms_norm(x, p.input_layernorm.weight, eps = 1e-6, offset = 1.0)            # 1
  w = p.self_attn.qkv_proj.weight
  kv = linear(h, slice(w, axis = 0, start = q_width, len = 2 * kv_width))         # 2: k | v
  k = norm_rope(T, kv_heads, head_dim, slice(kv, axis = 1, start = 0, len = kv_width),
                p.self_attn.k_norm.weight, cos, sin)                              # 4
  v = reshape(slice(kv, axis = 1, start = kv_width, len = kv_width), shape = [T, kv_heads, head_dim])
  ik = norm_rope(T, 1, index_dim, linear(h, p.self_attn.indexer.k_proj.weight),
                 p.self_attn.indexer.k_norm.weight, cos, sin)                     # 3, 4
  kc = kv_write(kc, k, slot)                                                      # 5
  vc = kv_write(vc, v, slot)
  ikc = kv_write(ikc, reshape(ik, shape = [T, index_dim]), slot)
  hn = gather(h, rows)                                                            # [N, dim]
  cn = gather(cos, rows)
  sn = gather(sin, rows)
  ql = linear(hn, slice(w, axis = 0, start = 0, len = q_width))                   # 2: q
  q = norm_rope(N, heads, head_dim, slice(ql, axis = 1, start = 0, len = q_width),
                p.self_attn.q_norm.weight, cn, sn)                                # 4
  iq = norm_rope(N, index_heads, index_dim, linear(hn, p.self_attn.indexer.q_proj.weight),
                 p.self_attn.indexer.q_norm.weight, cn, sn)                       # 3, 4
  o = sparse_attn(N, RN, q, iq, kc, vc, ikc, pos_n, pt_n)                         # 6, 7
  return sparse_layer_out(N, gather(x, rows), o, p), kc, vc, ikc                  # 8-13
}

# sparse_layer_rows as the model's last layer for rows `rows` of the T rows at positions pos,
# on the whole caches (its K / V / IK written at layer n_layers - 1), in a one-turn loop
# labelled as a layer stack, so that --gpus splits it like the other stacks. Returns the N
# rows' x [N, dim] and the caches.
fn last_layer_rows(T: int, N: int, RN: int, x: bf16[T, dim], rows: i32[N], slot: i32[T],
                   cos: f32[T, rope_half], sin: f32[T, rope_half], pos: i32[T],
                   pt_n: i32[RN, pt_len],
                   k_cache: bf16[n_layers, pages, page, kv_heads, head_dim],
                   v_cache: bf16[n_layers, pages, page, kv_heads, head_dim],
                   ik_cache: bf16[n_sparse, pages, page, index_dim])
    -> (bf16[N, dim], bf16[n_layers, pages, page, kv_heads, head_dim],
        bf16[n_layers, pages, page, kv_heads, head_dim], bf16[n_sparse, pages, page, index_dim]) {
  out = zeros(bf16, [N, dim])
  last_stack: repeat j in 1 {
    out, kl, vl, il = sparse_layer_rows(T, N, RN, x, rows, sparse[j + (n_sparse - 1)],
                                        k_cache[j + (n_layers - 1)], v_cache[j + (n_layers - 1)],
                                        ik_cache[j + (n_sparse - 1)], slot, cos, sin,
                                        gather(pos, rows), pt_n)
    k_cache = set_index(k_cache, j, kl, offset = n_layers - 1)
    v_cache = set_index(v_cache, j, vl, offset = n_layers - 1)
    ik_cache = set_index(ik_cache, j, il, offset = n_sparse - 1)
  }
  return out, k_cache, v_cache, ik_cache
}

# The embedding, the dense layers and the first NS sparse layers over T rows at positions
# pos, row t of the sequence whose page table is pt[t / (T / R)]: returns the residual
# x [T, dim], the [4, T, dim] buffer of captured states (every layer writes its output x into
# row cap_slot[layer]: rows 0..2 for the layers capture0..2, row 3 (scratch) for the others)
# and the updated caches.
fn forward_stack(T: int, R: int, NS: int, tokens: i32[T], pos: i32[T], pt: i32[R, pt_len],
                 slot: i32[T], cos: f32[T, rope_half], sin: f32[T, rope_half],
                 k_cache: bf16[n_layers, pages, page, kv_heads, head_dim],
                 v_cache: bf16[n_layers, pages, page, kv_heads, head_dim],
                 ik_cache: bf16[n_sparse, pages, page, index_dim])
    -> (bf16[T, dim], bf16[4, T, dim], bf16[n_layers, pages, page, kv_heads, head_dim],
        bf16[n_layers, pages, page, kv_heads, head_dim], bf16[n_sparse, pages, page, index_dim]) {
  x = gather(embed_tokens.weight, tokens)                              # [T, dim] bf16
  layer = iota(n = n_layers)
  is0 = 1 - min(abs(layer - capture0), 1)                              # 1 at layer capture0
  is1 = 1 - min(abs(layer - capture1), 1)
  is2 = 1 - min(abs(layer - capture2), 1)
  cap_slot = is1 + 2 * is2 + 3 * (1 - is0 - is1 - is2)                # [n_layers] i32
  caps = zeros(bf16, [4, T, dim])
  dense_stack: repeat i in n_dense {
    x, kl, vl = dense_layer(T, R, x, dense[i], k_cache[i], v_cache[i], pos, slot, pt, cos, sin)
    k_cache = set_index(k_cache, i, kl)
    v_cache = set_index(v_cache, i, vl)
    caps = set_index(caps, cap_slot[i], x)
  }
  sparse_stack: repeat j in NS {
    x, kl, vl, il = sparse_layer(T, R, x, sparse[j], k_cache[j + n_dense], v_cache[j + n_dense],
                                 ik_cache[j], pos, slot, pt, cos, sin)
    k_cache = set_index(k_cache, j, kl, offset = n_dense)
    v_cache = set_index(v_cache, j, vl, offset = n_dense)
    ik_cache = set_index(ik_cache, j, il)
    caps = set_index(caps, cap_slot[j + n_dense], x)
  }
  return x, caps, k_cache, v_cache, ik_cache
}

# The target model over T rows (forward_stack's rows and tables): returns the final residual
# x [T, dim], the captured states concat(x_c0, x_c1, x_c2) [T, 3*dim] (outputs of layers
# capture0..2) and the updated caches.
fn forward(T: int, R: int, tokens: i32[T], pos: i32[T], pt: i32[R, pt_len],
           k_cache: bf16[n_layers, pages, page, kv_heads, head_dim],
           v_cache: bf16[n_layers, pages, page, kv_heads, head_dim],
           ik_cache: bf16[n_sparse, pages, page, index_dim])
    -> (bf16[T, dim], bf16[T, 3 * dim], bf16[n_layers, pages, page, kv_heads, head_dim],
        bf16[n_layers, pages, page, kv_heads, head_dim], bf16[n_sparse, pages, page, index_dim]) {
  slot = kv_slots(T, R, pos, pt)
  cos, sin = rope_pos_table(pos, theta = rope_theta, dims = rope_dims) # [T, rope_half] f32
  x, caps, k_cache, v_cache, ik_cache = forward_stack(T, R, n_sparse, tokens, pos, pt, slot, cos,
                                                      sin, k_cache, v_cache, ik_cache)
  captured = concat(caps[0], caps[1], caps[2], axis = 1)
  return x, captured, k_cache, v_cache, ik_cache
}

# `forward` of one sequence (table pt) whose final residual is read at N of its T rows only
# (rows [N]; a prefill reads its last row): every layer but the last over all T rows, the last
# one's q, attention and output part over the N rows (last_layer_rows). Returns x [N, dim]
# (bitwise forward's rows `rows`) and the caches; no captured states (the last layer may be
# one of capture0..2: graphs that need them call `forward`).
fn forward_rows(T: int, N: int, rows: i32[N], tokens: i32[T], pos: i32[T], pt: i32[1, pt_len],
                k_cache: bf16[n_layers, pages, page, kv_heads, head_dim],
                v_cache: bf16[n_layers, pages, page, kv_heads, head_dim],
                ik_cache: bf16[n_sparse, pages, page, index_dim])
    -> (bf16[N, dim], bf16[n_layers, pages, page, kv_heads, head_dim],
        bf16[n_layers, pages, page, kv_heads, head_dim], bf16[n_sparse, pages, page, index_dim]) {
  slot = kv_slots(T, 1, pos, pt)
  cos, sin = rope_pos_table(pos, theta = rope_theta, dims = rope_dims) # [T, rope_half] f32
  x, caps, k_cache, v_cache, ik_cache = forward_stack(T, 1, n_sparse - 1, tokens, pos, pt, slot,
                                                      cos, sin, k_cache, v_cache, ik_cache)
  return last_layer_rows(T, N, 1, x, rows, slot, cos, sin, pos, pt, k_cache, v_cache, ik_cache)
}

# The target model over C + B rows of two kinds in one pass (serving's mixed step): rows
# 0 .. C-1 are one sequence (page table pt_p) at positions pos0 .., rows C .. C+B-1 one row of
# each of B sequences (row C + b at d_pos[b], page table pt_d[b]). Every part of a layer but
# its attention runs over all rows at once (each weight read once); the attention runs per
# kind, as in `forward` with R = 1 and with R = B. The last layer's q, attention and output
# part run for the rows read only (last_layer_rows, as in forward_rows): the chunk's row
# n_valid - 1 and the B decode rows. Returns their final residual x [1 + B, dim] (the chunk's
# row first) and the caches.
fn forward_mixed(C: int, B: int, tokens: i32[C], pos0: i32[], n_valid: i32[], pt_p: i32[1, pt_len],
                 d_tokens: i32[B], d_pos: i32[B], pt_d: i32[B, pt_len],
                 k_cache: bf16[n_layers, pages, page, kv_heads, head_dim],
                 v_cache: bf16[n_layers, pages, page, kv_heads, head_dim],
                 ik_cache: bf16[n_sparse, pages, page, index_dim])
    -> (bf16[1 + B, dim], bf16[n_layers, pages, page, kv_heads, head_dim],
        bf16[n_layers, pages, page, kv_heads, head_dim], bf16[n_sparse, pages, page, index_dim]) {
  pos_p = iota(n = C) + pos0
  slot = concat(kv_slots(C, 1, pos_p, pt_p), kv_slots(B, B, d_pos, pt_d), axis = 0)
  cos, sin = rope_pos_table(concat(pos_p, d_pos, axis = 0), theta = rope_theta, dims = rope_dims)
  x = gather(embed_tokens.weight, concat(tokens, d_tokens, axis = 0))   # [C + B, dim] bf16
  dense_stack: repeat i in n_dense {
    q, kl, vl = dense_attn_in(C + B, x, dense[i], k_cache[i], v_cache[i], slot, cos, sin)
    o = concat(dense_attn(C, 1, rows(q, 0, C), kl, vl, pos_p, pt_p),
               dense_attn(B, B, rows(q, C, B), kl, vl, d_pos, pt_d), axis = 0)
    x = dense_layer_out(C + B, x, o, dense[i])
    k_cache = set_index(k_cache, i, kl)
    v_cache = set_index(v_cache, i, vl)
  }
  sparse_stack: repeat j in n_sparse - 1 {
    q, iq, kl, vl, il = sparse_attn_in(C + B, x, sparse[j], k_cache[j + n_dense],
                                       v_cache[j + n_dense], ik_cache[j], slot, cos, sin)
    o = concat(sparse_attn(C, 1, rows(q, 0, C), rows(iq, 0, C), kl, vl, il, pos_p, pt_p),
               sparse_attn(B, B, rows(q, C, B), rows(iq, C, B), kl, vl, il, d_pos, pt_d),
               axis = 0)
    x = sparse_layer_out(C + B, x, o, sparse[j])
    k_cache = set_index(k_cache, j, kl, offset = n_dense)
    v_cache = set_index(v_cache, j, vl, offset = n_dense)
    ik_cache = set_index(ik_cache, j, il)
  }
  read = concat(reshape(n_valid - 1, shape = [1]), iota(n = B) + C, axis = 0) # [1 + B]
  return last_layer_rows(C + B, 1 + B, 1 + B, x, read, slot, cos, sin,
                         concat(pos_p, d_pos, axis = 0), concat(pt_p, pt_d, axis = 0),
                         k_cache, v_cache, ik_cache)
}

# The target model over P prompts of C rows each in one pass (serving's prefill group): rows
# p * C .. p * C + C - 1 are sequence p (page table pt[p]) at positions pos. Every part of a
# layer but its attention runs over all P * C rows at once (each weight read once for the
# group); the attention runs per sequence, as in `forward` with R = 1, each sequence's rows
# into its own rows of o. The last layer's q, attention and output part run for row
# n_valid[p] - 1 of each prompt only (last_layer_rows, as in forward_rows). Returns those
# P rows' final residual x [P, dim] and the caches.
fn forward_group(P: int, C: int, tokens: i32[P * C], pos: i32[P * C], pt: i32[P, pt_len],
                 n_valid: i32[P],
                 k_cache: bf16[n_layers, pages, page, kv_heads, head_dim],
                 v_cache: bf16[n_layers, pages, page, kv_heads, head_dim],
                 ik_cache: bf16[n_sparse, pages, page, index_dim])
    -> (bf16[P, dim], bf16[n_layers, pages, page, kv_heads, head_dim],
        bf16[n_layers, pages, page, kv_heads, head_dim], bf16[n_sparse, pages, page, index_dim]) {
  slot = gather(reshape(pt, shape = [P * pt_len]), iota(n = P * C) / C * pt_len + pos / page) * page +
         pos % page
  seq_pos = reshape(pos, shape = [P, C])
  cos, sin = rope_pos_table(pos, theta = rope_theta, dims = rope_dims)
  x = gather(embed_tokens.weight, tokens)                              # [P * C, dim] bf16
  o = zeros(bf16, [P, C, heads, head_dim])                             # every row written per layer
  dense_stack: repeat i in n_dense {
    q, kl, vl = dense_attn_in(P * C, x, dense[i], k_cache[i], v_cache[i], slot, cos, sin)
    seq_q = reshape(q, shape = [P, C, heads, head_dim])
    dense_seqs: repeat s in P {
      o = set_index(o, s, dense_attn(C, 1, seq_q[s], kl, vl, seq_pos[s],
                                     reshape(pt[s], shape = [1, pt_len])))
    }
    x = dense_layer_out(P * C, x, reshape(o, shape = [P * C, heads, head_dim]), dense[i])
    k_cache = set_index(k_cache, i, kl)
    v_cache = set_index(v_cache, i, vl)
  }
  sparse_stack: repeat j in n_sparse - 1 {
    q, iq, kl, vl, il = sparse_attn_in(P * C, x, sparse[j], k_cache[j + n_dense],
                                       v_cache[j + n_dense], ik_cache[j], slot, cos, sin)
    seq_q = reshape(q, shape = [P, C, heads, head_dim])
    seq_iq = reshape(iq, shape = [P, C, index_heads, index_dim])
    sparse_seqs: repeat s in P {
      o = set_index(o, s, sparse_attn(C, 1, seq_q[s], seq_iq[s], kl, vl, il, seq_pos[s],
                                      reshape(pt[s], shape = [1, pt_len])))
    }
    x = sparse_layer_out(P * C, x, reshape(o, shape = [P * C, heads, head_dim]), sparse[j])
    k_cache = set_index(k_cache, j, kl, offset = n_dense)
    v_cache = set_index(v_cache, j, vl, offset = n_dense)
    ik_cache = set_index(ik_cache, j, il)
  }
  rows = iota(n = P) * C + n_valid - 1                                 # each prompt's last row
  return last_layer_rows(P * C, P, P, x, rows, slot, cos, sin, pos, pt, k_cache, v_cache, ik_cache)
}

# LM_HEAD(NORM(x, norm)): fp32 logits, not rounded.
fn lm_logits(R: int, x: bf16[R, dim]) -> f32[R, vocab] {
  return linear(rms_norm(x, norm.weight, eps = 1e-6, offset = 1.0), lm_head.weight, dtype = f32)
}

# Draft K/V (§5.3 step 7) of T rows at positions pos, row t of the sequence whose page table
# is pt[t / (T / R)]: c = NORM(fc(captured), hidden_norm); Kd = ROPE(NORM_HEAD(c W_k,
# k_norm)), Vd = c W_v with W_k, W_v the k and v row blocks of the draft qkv_proj (one GEMM
# over both blocks); written at the rows' slots.
fn draft_kv_rows(T: int, R: int, captured: bf16[T, 3 * dim], pos: i32[T], pt: i32[R, pt_len],
                 kd: bf16[pages, page, kv_heads, head_dim], vd: bf16[pages, page, kv_heads, head_dim])
    -> (bf16[pages, page, kv_heads, head_dim], bf16[pages, page, kv_heads, head_dim]) {
  slot = kv_slots(T, R, pos, pt)
  cos, sin = rope_pos_table(pos, theta = rope_theta, dims = rope_dims)
  c = rms_norm(linear(captured, dspark.fc.weight), dspark.hidden_norm.weight, eps = 1e-6,
               offset = 1.0)                                           # [T, dim] bf16
  w_kv = slice(draft_layer[0].self_attn.qkv_proj.weight, axis = 0, start = q_width,
               len = 2 * kv_width)
  k, v = split(linear(c, w_kv), 2, axis = 1)                           # 2 x [T, kv_width] bf16
  k = norm_rope(T, kv_heads, head_dim, k, draft_layer[0].self_attn.k_norm.weight, cos, sin)
  v = reshape(v, shape = [T, kv_heads, head_dim])
  return kv_write(kd, k, slot), kv_write(vd, v, slot)
}

# draft_kv_rows of one sequence (pages seq0_table()) at positions pos0 ..
fn draft_kv(T: int, captured: bf16[T, 3 * dim], pos0: i32[],
            kd: bf16[pages, page, kv_heads, head_dim], vd: bf16[pages, page, kv_heads, head_dim])
    -> (bf16[pages, page, kv_heads, head_dim], bf16[pages, page, kv_heads, head_dim]) {
  return draft_kv_rows(T, 1, captured, iota(n = T) + pos0, seq0_table(), kd, vd)
}

# The DSpark draft layer (§5.3 step 2) over the blocks e [T, dim] of T / gamma sequences
# (gamma rows each, at positions L..): dense attention, non-causal, over each row's cached
# draft context [0, ctx_len[t]) (pages pt[t]) plus its block's own K/V (not written to the
# cache); then the dense swigluoai MLP of width draft_ffn.
fn draft_block(T: int, p: draft_layer, e: bf16[T, dim],
               kd: bf16[pages, page, kv_heads, head_dim], vd: bf16[pages, page, kv_heads, head_dim],
               ctx_len: i32[T], pt: i32[T, pt_len], cos: f32[T, rope_half],
               sin: f32[T, rope_half]) -> bf16[T, dim] {
  h = rms_norm(e, p.input_layernorm.weight, eps = 1e-6, offset = 1.0)
  q, k, v = qkv_heads(T, h, p.self_attn.qkv_proj.weight, p.self_attn.q_norm.weight,
                      p.self_attn.k_norm.weight, cos, sin)
  o = block_attention(q, kd, vd, ctx_len, pt, k, v, scale = 1.0 / sqrt(head_dim), page = page,
                      block_rows = gamma)
  x = e + linear(reshape(o, shape = [T, q_width]), p.self_attn.o_proj.weight)
  h = rms_norm(x, p.post_attention_layernorm.weight, eps = 1e-6, offset = 1.0)
  return x + mlp(T, draft_ffn, h, p.mlp.gate_up_proj.weight, p.mlp.down_proj.weight)
}

# §5.3 steps 1-4 for S sequences at once: sequence s (page table pt[s], its draft context
# Kd/Vd at positions 0 .. ctx_len[s] - 1) has the block [bonus[s], mask x (gamma - 1)] at
# ctx_len[s] .. in rows s * gamma ..: the Markov logits z [S * gamma, vocab] and the greedy
# drafts [S * gamma] (each sequence's chain from its bonus).
fn draft_tokens(S: int, bonus: i32[S], ctx_len: i32[S], pt: i32[S, pt_len],
                kd: bf16[pages, page, kv_heads, head_dim], vd: bf16[pages, page, kv_heads, head_dim])
    -> (f32[S * gamma, vocab], i32[S * gamma]) {
  seq = iota(n = S * gamma) / gamma                                        # each row's sequence
  k = iota(n = S * gamma) % gamma                                          # its place in the block
  first = 1 - min(k, 1)                                                    # 1 at the bonus rows
  ids = gather(bonus, seq) * first + (1 - first) * mask_id                 # [S * gamma] i32
  ctx = gather(ctx_len, seq)
  pos = ctx + k
  cos, sin = rope_pos_table(pos, theta = rope_theta, dims = rope_dims)
  e = gather(embed_tokens.weight, ids)                                     # target embedding
  x = draft_block(S * gamma, draft_layer[0], e, kd, vd, ctx, gather(pt, seq), cos, sin)
  base = linear(rms_norm(x, dspark.norm.weight, eps = 1e-6, offset = 1.0), lm_head.weight,
                dtype = f32)                                               # [S * gamma, vocab]
  return markov_draft(base, dspark.markov.w1.weight, dspark.markov.w2.weight, bonus)
}

# serve_prefill_spec's chunk (below): the target over the chunk's rows (every row through
# every layer: the draft needs the captured states), the next token after row n_valid - 1
# sampled with its margin, the captured states and the caches.
fn prefill_chunk(tokens: i32[prompt_len], pos0: i32[], n_valid: i32[], page_table: i32[pt_len],
                 temperature: f32[1], seed: i32[1],
                 k_cache: bf16[n_layers, pages, page, kv_heads, head_dim],
                 v_cache: bf16[n_layers, pages, page, kv_heads, head_dim],
                 ik_cache: bf16[n_sparse, pages, page, index_dim])
    -> (i32[1], f32[1], bf16[prompt_len, 3 * dim],
        bf16[n_layers, pages, page, kv_heads, head_dim],
        bf16[n_layers, pages, page, kv_heads, head_dim], bf16[n_sparse, pages, page, index_dim]) {
  x, captured, k_cache, v_cache, ik_cache = forward(prompt_len, 1, tokens, iota(n = prompt_len) + pos0,
                                                    reshape(page_table, shape = [1, pt_len]),
                                                    k_cache, v_cache, ik_cache)
  logits = lm_logits(1, gather(x, reshape(n_valid - 1, shape = [1])))
  next, margin = sample_tokens(logits, temperature, seed, reshape(pos0 + n_valid, shape = [1]))
  return next, margin, captured, k_cache, v_cache, ik_cache
}

# ---- graphs -------------------------------------------------------------------------------------
graph prefill(tokens: i32[prompt_len], pos0: i32[],
              k_cache: bf16[n_layers, pages, page, kv_heads, head_dim],
              v_cache: bf16[n_layers, pages, page, kv_heads, head_dim],
              ik_cache: bf16[n_sparse, pages, page, index_dim])
    -> (logits: f32[1, vocab], captured: bf16[prompt_len, 3 * dim],
        k_cache: bf16[n_layers, pages, page, kv_heads, head_dim],
        v_cache: bf16[n_layers, pages, page, kv_heads, head_dim],
        ik_cache: bf16[n_sparse, pages, page, index_dim]) {
  x, captured, k_cache, v_cache, ik_cache = forward(prompt_len, 1, tokens, iota(n = prompt_len) + pos0,
                                                    seq0_table(), k_cache, v_cache,
                                                    ik_cache)
  return lm_logits(1, rows(x, prompt_len - 1, 1)), captured, k_cache, v_cache, ik_cache
}

graph decode(tokens: i32[1], pos0: i32[],
             k_cache: bf16[n_layers, pages, page, kv_heads, head_dim],
             v_cache: bf16[n_layers, pages, page, kv_heads, head_dim],
             ik_cache: bf16[n_sparse, pages, page, index_dim])
    -> (logits: f32[1, vocab],
        k_cache: bf16[n_layers, pages, page, kv_heads, head_dim],
        v_cache: bf16[n_layers, pages, page, kv_heads, head_dim],
        ik_cache: bf16[n_sparse, pages, page, index_dim]) {
  x, captured, k_cache, v_cache, ik_cache = forward(1, 1, tokens, iota(n = 1) + pos0, seq0_table(),
                                                    k_cache, v_cache, ik_cache)
  return lm_logits(1, x), k_cache, v_cache, ik_cache
}

# DECODE and its greedy next token (the argmax on the device) in one graph call: generate's step,
# so that the argmax runs inside the step's CUDA graph instead of as a launch after it.
graph decode_next(tokens: i32[1], pos0: i32[],
                  k_cache: bf16[n_layers, pages, page, kv_heads, head_dim],
                  v_cache: bf16[n_layers, pages, page, kv_heads, head_dim],
                  ik_cache: bf16[n_sparse, pages, page, index_dim])
    -> (next: i32[1],
        k_cache: bf16[n_layers, pages, page, kv_heads, head_dim],
        v_cache: bf16[n_layers, pages, page, kv_heads, head_dim],
        ik_cache: bf16[n_sparse, pages, page, index_dim]) {
  x, captured, k_cache, v_cache, ik_cache = forward(1, 1, tokens, iota(n = 1) + pos0, seq0_table(),
                                                    k_cache, v_cache, ik_cache)
  return argmax(lm_logits(1, x)), k_cache, v_cache, ik_cache
}

# DECODE for a batch (§4.3): row b is one token of its own sequence, at position pos[b], whose
# page table is page_table[b]; the greedy next tokens (argmax on the device) and the logits.
graph decode_batch(tokens: i32[seqs], pos: i32[seqs], page_table: i32[seqs, pt_len],
                   k_cache: bf16[n_layers, pages, page, kv_heads, head_dim],
                   v_cache: bf16[n_layers, pages, page, kv_heads, head_dim],
                   ik_cache: bf16[n_sparse, pages, page, index_dim])
    -> (next: i32[seqs], logits: f32[seqs, vocab],
        k_cache: bf16[n_layers, pages, page, kv_heads, head_dim],
        v_cache: bf16[n_layers, pages, page, kv_heads, head_dim],
        ik_cache: bf16[n_sparse, pages, page, index_dim]) {
  x, captured, k_cache, v_cache, ik_cache = forward(seqs, seqs, tokens, pos, page_table, k_cache,
                                                    v_cache, ik_cache)
  logits = lm_logits(seqs, x)
  return argmax(logits), logits, k_cache, v_cache, ik_cache
}

# PREFILL of sequence `seq` (its pages: seq_table), positions 0..prompt_len-1; last-row logits.
graph prefill_seq(tokens: i32[prompt_len], seq: i32[],
                  k_cache: bf16[n_layers, pages, page, kv_heads, head_dim],
                  v_cache: bf16[n_layers, pages, page, kv_heads, head_dim],
                  ik_cache: bf16[n_sparse, pages, page, index_dim])
    -> (logits: f32[1, vocab],
        k_cache: bf16[n_layers, pages, page, kv_heads, head_dim],
        v_cache: bf16[n_layers, pages, page, kv_heads, head_dim],
        ik_cache: bf16[n_sparse, pages, page, index_dim]) {
  x, k_cache, v_cache, ik_cache = forward_rows(prompt_len, 1, iota(n = 1) + (prompt_len - 1), tokens,
                                              iota(n = prompt_len), seq_table(seq), k_cache,
                                              v_cache, ik_cache)
  return lm_logits(1, x), k_cache, v_cache, ik_cache
}

# VERIFY = EXTEND of the gamma+1 rows [bonus, d1..dgamma] at L..L+gamma; logits of every row.
graph verify(tokens: i32[verify_rows], pos0: i32[],
             k_cache: bf16[n_layers, pages, page, kv_heads, head_dim],
             v_cache: bf16[n_layers, pages, page, kv_heads, head_dim],
             ik_cache: bf16[n_sparse, pages, page, index_dim])
    -> (logits: f32[verify_rows, vocab], captured: bf16[verify_rows, 3 * dim],
        k_cache: bf16[n_layers, pages, page, kv_heads, head_dim],
        v_cache: bf16[n_layers, pages, page, kv_heads, head_dim],
        ik_cache: bf16[n_sparse, pages, page, index_dim]) {
  x, captured, k_cache, v_cache, ik_cache = forward(verify_rows, 1, tokens, iota(n = verify_rows) + pos0,
                                                    seq0_table(), k_cache, v_cache,
                                                    ik_cache)
  return lm_logits(verify_rows, x), captured, k_cache, v_cache, ik_cache
}

# §5.3 steps 1-4. bonus: the committed bonus token b at position ctx_len = L; Kd/Vd hold
# positions 0..L-1. Block [b, mask x (gamma-1)] at L..L+gamma-1, non-causal over the cached
# context plus the block (block K/V are not cached). Returns the greedy draft d1..dgamma and
# the Markov logits z (the draft distribution q = softmax(z / T) for sampling).
graph draft(bonus: i32[1], ctx_len: i32[],
            kd_cache: bf16[pages, page, kv_heads, head_dim],
            vd_cache: bf16[pages, page, kv_heads, head_dim])
    -> (draft: i32[gamma], z: f32[gamma, vocab]) {
  z, d = draft_tokens(1, bonus, reshape(ctx_len, shape = [1]), seq0_table(), kd_cache, vd_cache)
  return d, z
}

# §5.3 step 7 after a verify at pos0 = L: draft K/V of all gamma+1 verify rows. Rows past the
# accepted n+1 are stale and are overwritten by the next round before any draft reads them.
graph draft_commit(captured: bf16[verify_rows, 3 * dim], pos0: i32[],
                   kd_cache: bf16[pages, page, kv_heads, head_dim],
                   vd_cache: bf16[pages, page, kv_heads, head_dim])
    -> (kd_cache: bf16[pages, page, kv_heads, head_dim],
        vd_cache: bf16[pages, page, kv_heads, head_dim]) {
  kd_cache, vd_cache = draft_kv(verify_rows, captured, pos0, kd_cache, vd_cache)
  return kd_cache, vd_cache
}

# Draft K/V of the prompt rows from prefill's captured states (§5.3 starting state).
graph draft_prefill(captured: bf16[prompt_len, 3 * dim], pos0: i32[],
                    kd_cache: bf16[pages, page, kv_heads, head_dim],
                    vd_cache: bf16[pages, page, kv_heads, head_dim])
    -> (kd_cache: bf16[pages, page, kv_heads, head_dim],
        vd_cache: bf16[pages, page, kv_heads, head_dim]) {
  kd_cache, vd_cache = draft_kv(prompt_len, captured, pos0, kd_cache, vd_cache)
  return kd_cache, vd_cache
}

# SERVING (docs/running.md "Serving"; include/h3/serve.h). serve_prefill: one chunk of a
# prompt, rows pos0 .. pos0 + prompt_len - 1 of the sequence whose pages are page_table
# (0 where no page is allocated); rows at and after n_valid are padding (their K/V land past
# the prompt, overwritten by decode before any row reads them, or in page 0). The next token
# after row n_valid - 1, sampled (§4.5) at temperature[0] with key seed[0] for its position,
# and its decision margin.
graph serve_prefill(tokens: i32[prompt_len], pos0: i32[], n_valid: i32[], page_table: i32[pt_len],
                    temperature: f32[1], seed: i32[1],
                    k_cache: bf16[n_layers, pages, page, kv_heads, head_dim],
                    v_cache: bf16[n_layers, pages, page, kv_heads, head_dim],
                    ik_cache: bf16[n_sparse, pages, page, index_dim])
    -> (next: i32[1], margin: f32[1],
        k_cache: bf16[n_layers, pages, page, kv_heads, head_dim],
        v_cache: bf16[n_layers, pages, page, kv_heads, head_dim],
        ik_cache: bf16[n_sparse, pages, page, index_dim]) {
  x, k_cache, v_cache, ik_cache = forward_rows(prompt_len, 1, reshape(n_valid - 1, shape = [1]),
                                              tokens, iota(n = prompt_len) + pos0,
                                              reshape(page_table, shape = [1, pt_len]), k_cache,
                                              v_cache, ik_cache)
  next, margin = sample_tokens(lm_logits(1, x), temperature, seed,
                               reshape(pos0 + n_valid, shape = [1]))
  return next, margin, k_cache, v_cache, ik_cache
}

# serve_prefill_group: serve_prefill for prefill_group prompts of at most prompt_len tokens
# at once (forward_group): prompt p's n_valid[p] tokens at positions pos0[p] .., pages
# page_table[p]; its next token after row n_valid[p] - 1 sampled (§4.5) at temperature[p]
# with key seed[p], and its margin. The engine fills every slot (prefill_group > 1 only).
graph serve_prefill_group(tokens: i32[prefill_group, prompt_len], pos0: i32[prefill_group],
                          n_valid: i32[prefill_group], page_table: i32[prefill_group, pt_len],
                          temperature: f32[prefill_group], seed: i32[prefill_group],
                          k_cache: bf16[n_layers, pages, page, kv_heads, head_dim],
                          v_cache: bf16[n_layers, pages, page, kv_heads, head_dim],
                          ik_cache: bf16[n_sparse, pages, page, index_dim])
    -> (next: i32[prefill_group], margin: f32[prefill_group],
        k_cache: bf16[n_layers, pages, page, kv_heads, head_dim],
        v_cache: bf16[n_layers, pages, page, kv_heads, head_dim],
        ik_cache: bf16[n_sparse, pages, page, index_dim]) {
  pos = reshape(reshape(iota(n = prompt_len), shape = [1, prompt_len]) +
                reshape(pos0, shape = [prefill_group, 1]), shape = [group_rows])
  last, k_cache, v_cache, ik_cache = forward_group(prefill_group, prompt_len,
                                                   reshape(tokens, shape = [group_rows]), pos,
                                                   page_table, n_valid, k_cache, v_cache, ik_cache)
  next, margin = sample_tokens(lm_logits(prefill_group, last), temperature, seed, pos0 + n_valid)
  return next, margin, k_cache, v_cache, ik_cache
}

# serve_decode: one token of each of `seqs` sequences (row b at position pos[b], pages
# page_table[b]; padding rows: token 0 at position 0 with an all-zero table), each next token
# sampled (§4.5) at temperature[b] with key seed[b] for position pos[b] + 1, with its decision
# margin. Logits stay on the device.
graph serve_decode(tokens: i32[seqs], pos: i32[seqs], page_table: i32[seqs, pt_len],
                   temperature: f32[seqs], seed: i32[seqs],
                   k_cache: bf16[n_layers, pages, page, kv_heads, head_dim],
                   v_cache: bf16[n_layers, pages, page, kv_heads, head_dim],
                   ik_cache: bf16[n_sparse, pages, page, index_dim])
    -> (next: i32[seqs], margin: f32[seqs],
        k_cache: bf16[n_layers, pages, page, kv_heads, head_dim],
        v_cache: bf16[n_layers, pages, page, kv_heads, head_dim],
        ik_cache: bf16[n_sparse, pages, page, index_dim]) {
  x, captured, k_cache, v_cache, ik_cache = forward(seqs, seqs, tokens, pos, page_table, k_cache,
                                                    v_cache, ik_cache)
  next, margin = sample_tokens(lm_logits(seqs, x), temperature, seed, pos + 1)
  return next, margin, k_cache, v_cache, ik_cache
}

# serve_mixed: serve_prefill's chunk and serve_decode's rows in one pass (forward_mixed): the
# chunk's rows and the decode rows share every weight read. Outputs as the two graphs'.
graph serve_mixed(tokens: i32[prompt_len], pos0: i32[], n_valid: i32[], page_table: i32[pt_len],
                  temperature: f32[1], seed: i32[1],
                  d_tokens: i32[seqs], d_pos: i32[seqs], d_page_table: i32[seqs, pt_len],
                  d_temperature: f32[seqs], d_seed: i32[seqs],
                  k_cache: bf16[n_layers, pages, page, kv_heads, head_dim],
                  v_cache: bf16[n_layers, pages, page, kv_heads, head_dim],
                  ik_cache: bf16[n_sparse, pages, page, index_dim])
    -> (next: i32[1], margin: f32[1], d_next: i32[seqs], d_margin: f32[seqs],
        k_cache: bf16[n_layers, pages, page, kv_heads, head_dim],
        v_cache: bf16[n_layers, pages, page, kv_heads, head_dim],
        ik_cache: bf16[n_sparse, pages, page, index_dim]) {
  last, k_cache, v_cache, ik_cache = forward_mixed(prompt_len, seqs, tokens, pos0, n_valid,
                                                   reshape(page_table, shape = [1, pt_len]),
                                                   d_tokens, d_pos, d_page_table, k_cache, v_cache,
                                                   ik_cache)
  nx, mg = sample_tokens(lm_logits(1 + seqs, last), concat(temperature, d_temperature, axis = 0),
                         concat(seed, d_seed, axis = 0),
                         concat(reshape(pos0 + n_valid, shape = [1]), d_pos + 1, axis = 0))
  return rows(nx, 0, 1), rows(mg, 0, 1), rows(nx, 1, seqs), rows(mg, 1, seqs), k_cache, v_cache,
         ik_cache
}

# SPECULATIVE SERVING (DSpark, §5.3; h3exec --speculative dspark). The draft caches kd_cache /
# vd_cache use the target's page tables. serve_prefill_spec: serve_prefill's chunk, and the
# draft K/V of its rows from their captured states (rows past n_valid are padding, as there).
graph serve_prefill_spec(tokens: i32[prompt_len], pos0: i32[], n_valid: i32[],
                         page_table: i32[pt_len], temperature: f32[1], seed: i32[1],
                         k_cache: bf16[n_layers, pages, page, kv_heads, head_dim],
                         v_cache: bf16[n_layers, pages, page, kv_heads, head_dim],
                         ik_cache: bf16[n_sparse, pages, page, index_dim],
                         kd_cache: bf16[pages, page, kv_heads, head_dim],
                         vd_cache: bf16[pages, page, kv_heads, head_dim])
    -> (next: i32[1], margin: f32[1],
        k_cache: bf16[n_layers, pages, page, kv_heads, head_dim],
        v_cache: bf16[n_layers, pages, page, kv_heads, head_dim],
        ik_cache: bf16[n_sparse, pages, page, index_dim],
        kd_cache: bf16[pages, page, kv_heads, head_dim],
        vd_cache: bf16[pages, page, kv_heads, head_dim]) {
  next, margin, captured, k_cache, v_cache, ik_cache = prefill_chunk(tokens, pos0, n_valid,
                                                                     page_table, temperature, seed,
                                                                     k_cache, v_cache, ik_cache)
  kd_cache, vd_cache = draft_kv_rows(prompt_len, 1, captured, iota(n = prompt_len) + pos0,
                                     reshape(page_table, shape = [1, pt_len]), kd_cache, vd_cache)
  return next, margin, k_cache, v_cache, ik_cache, kd_cache, vd_cache
}

# serve_draft: §5.3 steps 1-4 (greedy) for seqs sequences at once: sequence b's bonus token
# at position ctx_len[b], its draft context at 0 .. ctx_len[b] - 1 in the pages page_table[b]
# (padding: bonus 0, ctx_len 0, an all-zero table); its draft in rows b * gamma ...
graph serve_draft(bonus: i32[seqs], ctx_len: i32[seqs], page_table: i32[seqs, pt_len],
                  kd_cache: bf16[pages, page, kv_heads, head_dim],
                  vd_cache: bf16[pages, page, kv_heads, head_dim])
    -> (draft: i32[seqs * gamma]) {
  z, d = draft_tokens(seqs, bonus, ctx_len, page_table, kd_cache, vd_cache)
  return d
}

# serve_verify: §5.3 steps 5 to 7 for seqs sequences at once: rows b * verify_rows + i hold
# [bonus, d1 .. dgamma][i] of sequence b at position pos (its L + i), page_table row b that
# sequence's (padding sequences: token 0 at position 0, an all-zero table). The acceptance
# (spec_accept: n accepted draft tokens and the tokens emitted, d1 .. dn then the target's own,
# greedy at temperature 0, else rejection sampling; seed and temperature per sequence) and the
# draft K/V of every row (§5.2's project rule: rows past the accepted ones are rewritten by
# the next round).
graph serve_verify(tokens: i32[spec_rows], pos: i32[spec_rows], page_table: i32[seqs, pt_len],
                   temperature: f32[seqs], seed: i32[seqs],
                   k_cache: bf16[n_layers, pages, page, kv_heads, head_dim],
                   v_cache: bf16[n_layers, pages, page, kv_heads, head_dim],
                   ik_cache: bf16[n_sparse, pages, page, index_dim],
                   kd_cache: bf16[pages, page, kv_heads, head_dim],
                   vd_cache: bf16[pages, page, kv_heads, head_dim])
    -> (n: i32[seqs], emitted: i32[seqs, verify_rows], margin: f32[seqs, verify_rows],
        k_cache: bf16[n_layers, pages, page, kv_heads, head_dim],
        v_cache: bf16[n_layers, pages, page, kv_heads, head_dim],
        ik_cache: bf16[n_sparse, pages, page, index_dim],
        kd_cache: bf16[pages, page, kv_heads, head_dim],
        vd_cache: bf16[pages, page, kv_heads, head_dim]) {
  x, captured, k_cache, v_cache, ik_cache = forward(spec_rows, seqs, tokens, pos, page_table,
                                                    k_cache, v_cache, ik_cache)
  r = iota(n = seqs * gamma)
  draft = gather(tokens, r + r / gamma + 1)                         # rows 1 .. gamma of each
  n, emitted, margin = spec_accept(lm_logits(spec_rows, x), draft, temperature, seed,
                                   gather(pos, iota(n = seqs) * verify_rows))
  kd_cache, vd_cache = draft_kv_rows(spec_rows, seqs, captured, pos, page_table, kd_cache,
                                     vd_cache)
  return n, emitted, margin, k_cache, v_cache, ik_cache, kd_cache, vd_cache
}

# Greedy generation without speculation: prefill of the prompt (positions 0..prompt_len-1),
# then max_new_tokens - 1 decode steps (decode_next: the step and its argmax); tokens[0] is the
# prefill's argmax.
program generate(prompt: i32[prompt_len]) -> (tokens: i32[max_new_tokens]) {
  k_cache = zeros(bf16, [n_layers, pages, page, kv_heads, head_dim])
  v_cache = zeros(bf16, [n_layers, pages, page, kv_heads, head_dim])
  ik_cache = zeros(bf16, [n_sparse, pages, page, index_dim])
  positions = iota(n = prompt_len + max_new_tokens)                      # [..] i32
  seq0 = zeros(i32, [])
  # sequence 0's prefill (positions 0 ..), without the draft's captured states that `prefill`
  # also returns
  logits, k_cache, v_cache, ik_cache = prefill_seq(prompt, seq0, k_cache, v_cache, ik_cache)
  token = argmax(logits)                                                 # [1] i32
  out = set_index(zeros(i32, [max_new_tokens]), 0, token[0])
  decode_loop: for k in max_new_tokens - 1 {
    token, k_cache, v_cache, ik_cache = decode_next(token, positions[k + prompt_len], k_cache,
                                                    v_cache, ik_cache)
    out = set_index(out, k, token[0], offset = 1)
  }
  return out
}

# Greedy generation for `seqs` sequences at once: each prompt prefilled into its own pages
# (sequence b: pages b * pt_len + 1 ..), then max_new_tokens - 1 batched decode steps;
# tokens[k, b] is sequence b's k-th new token.
program generate_batch(prompt: i32[seqs, prompt_len]) -> (tokens: i32[max_new_tokens, seqs]) {
  k_cache = zeros(bf16, [n_layers, pages, page, kv_heads, head_dim])
  v_cache = zeros(bf16, [n_layers, pages, page, kv_heads, head_dim])
  ik_cache = zeros(bf16, [n_sparse, pages, page, index_dim])
  seq_ids = iota(n = seqs)
  first = zeros(i32, [seqs])
  prefill_loop: for b in seqs {
    logits, k_cache, v_cache, ik_cache = prefill_seq(prompt[b], seq_ids[b], k_cache, v_cache,
                                                     ik_cache)
    token = argmax(logits)                                               # [1] i32
    first = set_index(first, b, token[0])
  }
  tables = reshape(iota(n = seqs * pt_len) + 1, shape = [seqs, pt_len])
  positions = iota(n = prompt_len + max_new_tokens)
  out = set_index(zeros(i32, [max_new_tokens, seqs]), 0, first)
  tokens = first
  decode_loop: for k in max_new_tokens - 1 {
    pos = zeros(i32, [seqs]) + positions[k + prompt_len]
    tokens, logits, k_cache, v_cache, ik_cache = decode_batch(tokens, pos, tables, k_cache, v_cache,
                                                              ik_cache)
    out = set_index(out, k, tokens, offset = 1)
  }
  return out
}
