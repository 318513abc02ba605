/* make_model.c — tpx-bench-train-model: writes a random-weight
 * LlamaForCausalLM checkpoint (config.json + f32 model.safetensors, untied)
 * and a token batch for the training benchmark, so the benchmark needs no
 * Python. Weights ~ N(0, 0.02), norms 1.
 * usage: tpx-bench-train-model DIR HIDDEN LAYERS HEADS KV_HEADS INTER VOCAB B T
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static double uniform(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return ((double)(rng >> 11) + 0.5) / 9007199254740992.0;
}
static float normal(void) {
  return (float)(sqrt(-2.0 * log(uniform())) *
                 cos(6.283185307179586 * uniform()));
}

typedef struct tensor {
  char name[128];
  int64_t d0, d1;
  int ndim;
  int norm;
} tensor;

int main(int argc, char **argv) {
  if (argc != 10) {
    fprintf(stderr,
            "usage: %s DIR HIDDEN LAYERS HEADS KV_HEADS INTER VOCAB B T\n",
            argv[0]);
    return 2;
  }
  const char *dir = argv[1];
  int64_t h = atoll(argv[2]), nl = atoll(argv[3]), nh = atoll(argv[4]),
          kv = atoll(argv[5]), in = atoll(argv[6]), v = atoll(argv[7]),
          b = atoll(argv[8]), t = atoll(argv[9]);
  int64_t hd = h / nh;
  char path[4096];
  snprintf(path, sizeof path, "%s/config.json", dir);
  FILE *f = fopen(path, "w");
  if (!f) {
    perror(path);
    return 1;
  }
  fprintf(f,
          "{\"architectures\":[\"LlamaForCausalLM\"],\"model_type\":\"llama\","
          "\"hidden_size\":%lld,\"num_hidden_layers\":%lld,\"num_attention_"
          "heads\":%lld,"
          "\"num_key_value_heads\":%lld,\"intermediate_size\":%lld,\"vocab_"
          "size\":%lld,"
          "\"head_dim\":%lld,\"rms_norm_eps\":1e-05,\"rope_theta\":10000.0,"
          "\"rope_scaling\":null,"
          "\"hidden_act\":\"silu\",\"max_position_embeddings\":4096,\"tie_word_"
          "embeddings\":false,"
          "\"attention_bias\":false,\"mlp_bias\":false,\"torch_dtype\":"
          "\"float32\"}\n",
          (long long)h, (long long)nl, (long long)nh, (long long)kv,
          (long long)in, (long long)v, (long long)hd);
  fclose(f);
  size_t nt = 3 + 9 * (size_t)nl, k = 0;
  tensor *ts = calloc(nt, sizeof *ts);
  snprintf(ts[k].name, 128, "model.embed_tokens.weight");
  ts[k].d0 = v;
  ts[k].d1 = h;
  ts[k++].ndim = 2;
  for (int64_t l = 0; l < nl; l++) {
    struct {
      const char *n;
      int64_t d0, d1;
      int ndim, norm;
    } L[] = {{"input_layernorm", h, 1, 1, 1},
             {"post_attention_layernorm", h, 1, 1, 1},
             {"self_attn.q_proj", nh * hd, h, 2, 0},
             {"self_attn.k_proj", kv * hd, h, 2, 0},
             {"self_attn.v_proj", kv * hd, h, 2, 0},
             {"self_attn.o_proj", h, nh * hd, 2, 0},
             {"mlp.gate_proj", in, h, 2, 0},
             {"mlp.up_proj", in, h, 2, 0},
             {"mlp.down_proj", h, in, 2, 0}};
    for (int i = 0; i < 9; i++, k++) {
      snprintf(ts[k].name, 128, "model.layers.%lld.%s.weight", (long long)l,
               L[i].n);
      ts[k].d0 = L[i].d0;
      ts[k].d1 = L[i].d1;
      ts[k].ndim = L[i].ndim;
      ts[k].norm = L[i].norm;
    }
  }
  snprintf(ts[k].name, 128, "model.norm.weight");
  ts[k].d0 = h;
  ts[k].d1 = 1;
  ts[k].ndim = 1;
  ts[k++].norm = 1;
  snprintf(ts[k].name, 128, "lm_head.weight");
  ts[k].d0 = v;
  ts[k].d1 = h;
  ts[k++].ndim = 2;
  size_t cap = 256 * nt + 64, hl = 0;
  char *hdr = malloc(cap);
  int64_t off = 0;
  hl += (size_t)snprintf(hdr + hl, cap - hl, "{");
  for (size_t i = 0; i < nt; i++) {
    int64_t n = ts[i].d0 * ts[i].d1;
    if (ts[i].ndim == 2)
      hl += (size_t)snprintf(hdr + hl, cap - hl,
                             "%s\"%s\":{\"dtype\":\"F32\",\"shape\":[%lld,%lld]"
                             ",\"data_offsets\":[%lld,%lld]}",
                             i ? "," : "", ts[i].name, (long long)ts[i].d0,
                             (long long)ts[i].d1, (long long)off,
                             (long long)(off + 4 * n));
    else
      hl += (size_t)snprintf(hdr + hl, cap - hl,
                             "%s\"%s\":{\"dtype\":\"F32\",\"shape\":[%lld],"
                             "\"data_offsets\":[%lld,%lld]}",
                             i ? "," : "", ts[i].name, (long long)ts[i].d0,
                             (long long)off, (long long)(off + 4 * n));
    off += 4 * n;
  }
  hdr[hl++] = '}';
  while (hl % 8) hdr[hl++] = ' ';
  snprintf(path, sizeof path, "%s/model.safetensors", dir);
  f = fopen(path, "wb");
  if (!f) {
    perror(path);
    return 1;
  }
  unsigned char l8[8];
  for (int i = 0; i < 8; i++) l8[i] = (unsigned char)((uint64_t)hl >> (8 * i));
  fwrite(l8, 1, 8, f);
  fwrite(hdr, 1, hl, f);
  int64_t total = 0;
  for (size_t i = 0; i < nt; i++) {
    int64_t n = ts[i].d0 * ts[i].d1;
    float *d = malloc(sizeof(float) * (size_t)n);
    for (int64_t j = 0; j < n; j++) d[j] = ts[i].norm ? 1.0f : 0.02f * normal();
    fwrite(d, sizeof(float), (size_t)n, f);
    free(d);
    total += n;
  }
  if (fclose(f)) {
    perror(path);
    return 1;
  }
  snprintf(path, sizeof path, "%s/tokens.bin", dir);
  f = fopen(path, "wb");
  for (int64_t i = 0; i < b * (t + 1); i++) {
    int32_t id = (int32_t)(uniform() * (double)v);
    unsigned char le[4] = {(unsigned char)id, (unsigned char)(id >> 8),
                           (unsigned char)(id >> 16),
                           (unsigned char)(id >> 24)};
    fwrite(le, 1, 4, f);
  }
  fclose(f);
  printf("%s: %lld parameters\n", dir, (long long)total);
  free(ts);
  free(hdr);
  return 0;
}
