/* test_report_html.c — `tpx plan --html`'s page (tpx_report_html): one
 * self-contained document (no script, nothing fetched), the verdict, the
 * diagnostics, stacked memory bars, the module tree with repeated layers
 * collapsed, each parameter's block map with the slice every rank holds in
 * its hover text, the collectives table; names are escaped; ranks grouped
 * on the dp_shard × tp grid at 8 and 64 ranks. */
#include <math.h>

#include "../shard/shard_fixture.h"
#include "tpx/report.h"

static char *page(const tpx_sharding *sh, const tpx_report_options *o) {
  char *html = NULL;
  tpx_error e = {0};
  ck_assert_msg(tpx_report_html(sh, o, &html, &e) == TPX_OK, "%s", e.message);
  ck_assert_ptr_nonnull(html);
  return html;
}

START_TEST(self_contained_page) {
  tpx_model *m = fx_llama();
  tpx_plan *p = fx_llama_plan();
  tpx_mesh *mesh = fx_mesh(1, 2, 2);
  tpx_sharding *sh = fx_shard(m, p, mesh, NULL);
  tpx_report_options o = TPX_REPORT_OPTIONS_INIT;
  o.plan_source = "plugin";
  o.plugin_name = "llama";
  char *html = page(sh, &o);
  ck_assert_int_eq(strncmp(html, "<!DOCTYPE html>", 15), 0);
  ck_assert_ptr_nonnull(strstr(html, "</body></html>\n"));
  ck_assert_ptr_null(strstr(html, "<script"));
  ck_assert_ptr_null(strstr(html, "<link"));
  ck_assert_ptr_null(strstr(html, "@import"));
  ck_assert_ptr_null(strstr(html, "src="));
  /* The only URL is the SVG namespace (an identifier, never fetched). */
  ck_assert_uint_eq(
      fx_occurrences(html, "http"),
      fx_occurrences(html, "xmlns=\"http://www.w3.org/2000/svg\""));
  ck_assert_ptr_nonnull(strstr(html, "id=\"verdict\">OK<"));
  ck_assert_ptr_nonnull(strstr(html, "id=\"memory\""));
  ck_assert_ptr_nonnull(strstr(html, "id=\"collectives\""));
  /* Two identical layers render once in the tree... */
  ck_assert_ptr_nonnull(strstr(html, "0 … 1 (2 identical)"));
  /* ...and each parameter template has one block map, marked ×2. */
  ck_assert_uint_eq(
      fx_occurrences(html, ">model.layers.*.self_attn.q_proj.weight <span "
                           "class=\"rep\">×2</span>"),
      1);
  /* q_proj [64, 64] colwise on tp=2 then FSDP over dp_shard=2 (strided
   * after TP): rank 1 (dp 0, tp 1) holds rows [32, 48), bf16 16x64x2 B. */
  ck_assert_msg(
      strstr(html,
             "rank 1\ndim 0: [32, 48), dim 1: [0, 64)\n2.0 KiB (2048 bytes)") !=
          NULL,
      "rank 1's q_proj block is missing");
  /* Every drawn rect of q_proj has a title: 4 distinct blocks. */
  const char *q = strstr(html, "model.layers.*.self_attn.q_proj.weight <span");
  const char *next = strstr(q + 1, "<div class=\"bm\">");
  size_t blocks = 0;
  for (const char *r = strstr(q, "<rect"); r && (!next || r < next);
       r = strstr(r + 1, "<rect"))
    blocks++;
  ck_assert_uint_eq(blocks, 4);
  free(html);
  tpx_sharding_destroy(sh);
  tpx_mesh_destroy(mesh);
  tpx_plan_destroy(p);
  tpx_model_destroy(m);
}
END_TEST

START_TEST(errors_uneven_and_escaping) {
  /* vocab 250 over tp=4: torch.chunk gives 63, 63, 63, 61 rows. */
  fx_opts fo = {250, 0, 0, 0, NULL};
  tpx_model *m = fx_model(&fo);
  tpx_error e = {0};
  ck_assert_int_eq(
      tpx_model_add_module(m, "model.x<y>&\"z\"", TPX_MODULE_NORM, NULL, &e),
      TPX_OK);
  tpx_plan *p = fx_llama_plan();
  tpx_mesh *mesh = fx_mesh(1, 1, 4);
  tpx_sharding *sh = fx_shard(m, p, mesh, NULL);
  tpx_diag_list *sel = NULL;
  ck_assert_int_eq(tpx_diag_list_create(&sel, &e), TPX_OK);
  ck_assert_int_eq(tpx_diag_add(sel, TPX_DIAG_ERROR, "heads-not-divisible",
                                "num_attention_heads", "use tp 2", "%s",
                                "heads <8> fail"),
                   TPX_OK);
  tpx_report_options o = TPX_REPORT_OPTIONS_INIT;
  o.selection_diags = sel;
  char *html = page(sh, &o);
  ck_assert_ptr_nonnull(strstr(html, "id=\"verdict\">NOT OK: 1 error<"));
  ck_assert_ptr_nonnull(strstr(html, "heads &lt;8&gt; fail"));
  ck_assert_ptr_nonnull(strstr(html, "x&lt;y&gt;&amp;&quot;z&quot;"));
  ck_assert_ptr_null(strstr(html, "x<y>"));
  ck_assert_ptr_nonnull(
      strstr(html, "rank 3\ndim 0: [189, 250), dim 1: [0, 64)"));
  free(html);
  tpx_diag_list_destroy(sel);
  tpx_sharding_destroy(sh);
  tpx_mesh_destroy(mesh);
  tpx_plan_destroy(p);
  tpx_model_destroy(m);
}
END_TEST

START_TEST(bad_arguments) {
  char *html = (char *)1;
  tpx_error e = {0};
  ck_assert_int_eq(tpx_report_html(NULL, NULL, &html, &e),
                   TPX_INVALID_ARGUMENT);
  ck_assert_ptr_nonnull(strstr(e.message, "tpx_report_html"));
  tpx_model *m = fx_llama();
  tpx_mesh *mesh = fx_mesh(1, 1, 1);
  tpx_sharding *sh = fx_shard(m, NULL, mesh, NULL);
  tpx_report_options o = TPX_REPORT_OPTIONS_INIT;
  o.struct_size = 4;
  memset(&e, 0, sizeof e);
  ck_assert_int_eq(tpx_report_html(sh, &o, &html, &e), TPX_INVALID_ARGUMENT);
  ck_assert_ptr_null(html);
  html = page(sh, NULL); /* defaults; tp 1: no collectives */
  ck_assert_ptr_nonnull(strstr(html, "none (no style applies at this tp)"));
  free(html);
  tpx_sharding_destroy(sh);
  tpx_mesh_destroy(mesh);
  tpx_model_destroy(m);
}
END_TEST

/* Issue 18 item 11: the page at 8 and 64 ranks. Blocks are grouped by the
 * dp_shard × tp grid and labelled (in the block, or by tp band in the
 * margin when blocks are too thin), the memory bars name their ranks as
 * ranges and every segment's figure, FSDP units are listed, diagnostics
 * run error → warning → info. */
START_TEST(grouped_ranks_8_and_64) {
  const int64_t dps = _i ? 16 : 2; /* world 8 or 64, tp 4 */
  tpx_model *m = fx_llama();
  tpx_plan *p = fx_llama_plan();
  tpx_mesh *mesh = fx_mesh(1, dps, 4);
  tpx_sharding *sh = fx_shard(m, p, mesh, NULL);
  tpx_diag_list *sel = NULL;
  ck_assert_int_eq(tpx_diag_list_create(&sel, NULL), TPX_OK);
  ck_assert_int_eq(
      tpx_diag_add(sel, TPX_DIAG_INFO, "i-code", "s", NULL, "%s", "an info"),
      TPX_OK);
  ck_assert_int_eq(tpx_diag_add(sel, TPX_DIAG_WARNING, "w-code", "s", NULL,
                                "%s", "a warning"),
                   TPX_OK);
  ck_assert_int_eq(
      tpx_diag_add(sel, TPX_DIAG_ERROR, "e-code", "s", NULL, "%s", "an error"),
      TPX_OK);
  tpx_report_options o = TPX_REPORT_OPTIONS_INIT;
  o.selection_diags = sel;
  char *html = page(sh, &o);
  const char *e = strstr(html, "an error"), *w = strstr(html, "a warning"),
             *in = strstr(html, "an info");
  ck_assert(e && w && in && e < w && w < in);
  /* memory: rank ranges, never "ranks 0,… (N)"; every segment's figure */
  ck_assert_ptr_null(strstr(html, ",… ("));
  ck_assert_ptr_nonnull(strstr(html, _i ? "ranks 0-63" : "ranks 0-7"));
  ck_assert_ptr_nonnull(strstr(html, "parameters "));
  ck_assert_ptr_nonnull(strstr(html, " · gradients "));
  /* FSDP units */
  ck_assert_ptr_nonnull(strstr(html, "id=\"fsdp\""));
  ck_assert_ptr_nonnull(strstr(html, "(root)"));
  /* the grid explained, the old unexplained "r0+" gone */
  ck_assert_ptr_nonnull(strstr(html, "<b>t1·s0</b>"));
  ck_assert_ptr_null(strstr(html, ">r0+<"));
  /* q_proj [64, 64]: tp 4 then dp_shard strided: 4·dps row blocks. At 8
   * ranks each is labelled in place; at 64 they are too thin, and the
   * margin names the four tp bands. */
  const char *q = strstr(html, "model.layers.*.self_attn.q_proj.weight <span");
  ck_assert_ptr_nonnull(q);
  const char *next = strstr(q + 1, "<div class=\"bm\">");
  char *qmap = strndup(q, next ? (size_t)(next - q) : strlen(q));
  if (!_i) {
    ck_assert_ptr_nonnull(strstr(qmap, ">t0·s0</text>"));
    ck_assert_ptr_nonnull(strstr(qmap, ">t3·s1</text>"));
    ck_assert_ptr_nonnull(strstr(qmap, "group t3·s1</title>"));
  } else {
    for (int j = 0; j < 4; j++) {
      char band[32];
      snprintf(band, sizeof band, ">tp %d</text>", j);
      ck_assert_msg(strstr(qmap, band) != NULL, "band %d unlabelled", j);
    }
    ck_assert_ptr_nonnull(strstr(qmap, "group t2·s15</title>"));
  }
  /* a norm is the same on every tp rank: grey, grouped by dp_shard only */
  ck_assert_ptr_nonnull(strstr(html, "group s1</title>"));
  free(qmap);
  free(html);
  tpx_diag_list_destroy(sel);
  tpx_sharding_destroy(sh);
  tpx_mesh_destroy(mesh);
  tpx_plan_destroy(p);
  tpx_model_destroy(m);
}
END_TEST

/* Under cp the blocks are the FSDP shards of dp_shard_cp: q_proj [64, 64]
 * on dp_shard 2 x cp 2 x tp 2 is 8 row blocks of 8 rows, labelled with
 * their index in dp_shard_cp (s0..s3), rank (s 1, c 0, t 1) = 5 holding
 * rows [32 + 2 * 8, +8) = [48, 56) of its tp half. */
START_TEST(cp_blocks_by_dp_shard_cp) {
  tpx_model *m = fx_llama();
  tpx_plan *p = fx_llama_plan();
  tpx_mesh *mesh = NULL;
  ck_assert_int_eq(tpx_mesh_create_fsdp2(1, 2, 2, 2, &mesh, NULL), TPX_OK);
  tpx_sharding_options so = TPX_SHARDING_OPTIONS_INIT;
  so.dp_shard_dim = "dp_shard_cp";
  tpx_sharding *sh = fx_shard(m, p, mesh, &so);
  tpx_report_options o = TPX_REPORT_OPTIONS_INIT;
  char *html = page(sh, &o);
  const char *q = strstr(html, "model.layers.*.self_attn.q_proj.weight <span");
  ck_assert_ptr_nonnull(q);
  const char *next = strstr(q + 1, "<div class=\"bm\">");
  char *qmap = strndup(q, next ? (size_t)(next - q) : strlen(q));
  ck_assert_ptr_nonnull(strstr(qmap, ">t1·s3</text>"));
  ck_assert_ptr_nonnull(
      strstr(qmap, "rank 5\ndim 0: [48, 56), dim 1: [0, 64)"));
  free(qmap);
  free(html);
  tpx_sharding_destroy(sh);
  tpx_mesh_destroy(mesh);
  tpx_plan_destroy(p);
  tpx_model_destroy(m);
}
END_TEST

/* At 64 ranks k_proj [512, 2048] colwise on tp 8 then FSDP over dp_shard
 * 8 is 64 row blocks of 8 rows: drawn in proportion (80 px tall) they were
 * 1.25 px stripes. No block of any map is drawn thinner than 3 px, and the
 * blocks still tile their map in order (each starts where the one above
 * ends). */
START_TEST(no_block_thinner_than_3px) {
  tpx_model *m = NULL;
  tpx_error e = {0};
  ck_assert_int_eq(tpx_model_create(&m, &e), TPX_OK);
  ck_assert_int_eq(tpx_model_set_config(m, fx_llama_config,
                                        strlen(fx_llama_config), "fx", &e),
                   TPX_OK);
  fx_linear(m, "model.layers.0.self_attn.q_proj", 2048, 2048, 0);
  fx_linear(m, "model.layers.0.self_attn.k_proj", 512, 2048, 1);
  fx_linear(m, "model.layers.0.self_attn.v_proj", 512, 2048, 0);
  fx_linear(m, "model.layers.0.self_attn.o_proj", 2048, 2048, 0);
  tpx_plan *p = fx_llama_plan();
  tpx_mesh *mesh = fx_mesh(1, 8, 8);
  tpx_sharding *sh = fx_shard(m, p, mesh, NULL);
  tpx_report_options o = TPX_REPORT_OPTIONS_INIT;
  char *html = page(sh, &o);
  const char *maps = strstr(html, "<h2>Who holds what</h2>");
  ck_assert_ptr_nonnull(maps);
  const char *end = strstr(maps + 1, "<h2>");
  size_t rects = 0;
  for (const char *r = strstr(maps, "<rect "); r && (!end || r < end);
       r = strstr(r + 1, "<rect ")) {
    double x, y, w, h;
    ck_assert_int_eq(sscanf(r,
                            "<rect x=\"%lf\" y=\"%lf\" width=\"%lf\" "
                            "height=\"%lf\"",
                            &x, &y, &w, &h),
                     4);
    ck_assert_msg(w >= 3.0 && h >= 3.0, "a %.2f x %.2f px block: %.120s", w, h,
                  r);
    rects++;
  }
  /* q, k, v (weights, k's bias) and o: 64 blocks each */
  ck_assert_uint_eq(rects, 5 * 64);
  /* k_proj: 64 stripes of the same height, none overlapping another */
  const char *k = strstr(maps, "self_attn.k_proj.weight");
  ck_assert_ptr_nonnull(k);
  double ys[64], hs[64];
  const char *r = strstr(k, "<rect ");
  for (int i = 0; i < 64; i++, r = strstr(r + 1, "<rect ")) {
    double x, w;
    ck_assert_ptr_nonnull(r);
    ck_assert_int_eq(sscanf(r,
                            "<rect x=\"%lf\" y=\"%lf\" width=\"%lf\" "
                            "height=\"%lf\"",
                            &x, &ys[i], &w, &hs[i]),
                     4);
    ck_assert_msg(fabs(hs[i] - hs[0]) < 0.01, "block %d is %.2f px", i, hs[i]);
  }
  for (int i = 0; i < 64; i++)
    for (int j = 0; j < 64; j++)
      ck_assert_msg(i == j || ys[j] >= ys[i] + hs[i] - 0.01 ||
                        ys[i] >= ys[j] + hs[j] - 0.01,
                    "blocks %d and %d overlap", i, j);
  free(html);
  tpx_sharding_destroy(sh);
  tpx_mesh_destroy(mesh);
  tpx_plan_destroy(p);
  tpx_model_destroy(m);
}
END_TEST

static Suite *html_suite(void) {
  Suite *s = suite_create("report-html");
  TCase *tc = tcase_create("report-html");
  tcase_add_test(tc, self_contained_page);
  tcase_add_test(tc, cp_blocks_by_dp_shard_cp);
  tcase_add_test(tc, errors_uneven_and_escaping);
  tcase_add_test(tc, bad_arguments);
  tcase_add_test(tc, no_block_thinner_than_3px);
  tcase_add_loop_test(tc, grouped_ranks_8_and_64, 0, 2);
  suite_add_tcase(s, tc);
  return s;
}

FX_MAIN(html_suite)
