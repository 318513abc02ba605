/* no_symbols.c — a shared object that exports nothing at all. */
int tpxtest_hidden_function(void);
__attribute__((visibility("hidden"))) int tpxtest_hidden_function(void) {
  return 42;
}
