# stats.awk — median, min and max of each named series. Input lines:
# "<series> <value>" (value "failed" is counted, not averaged). Output, one
# line per series in first-seen order: "<series> <median> <min> <max> <n>
# <failed>" (median "-" when no run succeeded).
{
  if (!($1 in seen)) { seen[$1] = 1; order[++ns] = $1 }
  if ($2 == "failed" || $2 == "") { fail[$1]++; next }
  v[$1, ++n[$1]] = $2 + 0
}
END {
  for (s = 1; s <= ns; s++) {
    k = order[s]; m = n[k] + 0
    if (m == 0) { printf "%s - - - 0 %d\n", k, fail[k] + 0; continue }
    # insertion sort: a handful of values
    for (i = 2; i <= m; i++) {
      x = v[k, i]
      for (j = i - 1; j >= 1 && v[k, j] > x; j--) v[k, j + 1] = v[k, j]
      v[k, j + 1] = x
    }
    med = (m % 2) ? v[k, (m + 1) / 2] : (v[k, m / 2] + v[k, m / 2 + 1]) / 2
    printf "%s %.6g %.6g %.6g %d %d\n", k, med, v[k, 1], v[k, m], m, fail[k] + 0
  }
}
