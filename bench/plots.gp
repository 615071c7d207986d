# bench/plots.gp: the two plots of bench/RESULTS.md, from dqbench's data.
#   gnuplot -e "dir='build-bench/bench-out'" bench/plots.gp
# Reads dir/vars.gp, dir/throughput.dat, dir/lateness-*.dat; writes
# dir/throughput.png and dir/lateness.png.
if (!exists("dir")) dir = "."
load dir."/vars.gp"
set terminal pngcairo size 960,600 font "DejaVu Sans,11" noenhanced
set grid
set key top left box opaque

# ---- throughput against batch size ---------------------------------------
set output dir."/throughput.png"
set title "libdelayq push throughput vs batch size (one client)\n".title_run font ",9"
set logscale x
set xrange [0.7:1500]
set xtics ("1" 1, "10" 10, "100" 100, "1000" 1000)
set xlabel "jobs per dq_push_batch call (1 = dq_push)"
set ylabel "jobs/s"
set format y "%.0f"
set yrange [0:*]
plot dir."/throughput.dat" using 1:2:3:4 with yerrorlines lw 2 pt 7 ps 1.3 \
       title "libdelayq push (median, min..max of runs)", \
     lim_p16 with lines dt 2 lw 2 lc rgb "#c00000" \
       title sprintf("limit: EVALSHA HSET+ZADD -c 50 -P 16 = %.0f/s", lim_p16), \
     lim_c1 with lines dt 3 lw 2 lc rgb "#008000" \
       title sprintf("limit: EVALSHA HSET+ZADD -c 1 -P 1 = %.0f/s", lim_c1), \
     zadd_p16 with lines dt 4 lw 1 lc rgb "#808080" \
       title sprintf("plain ZADD -c 50 -P 16 = %.0f/s", zadd_p16), \
     150000 with lines dt 1 lw 1 lc rgb "#ff8c00" title "target for batches: 150,000/s"

# ---- lateness distribution (CDF) -----------------------------------------
unset logscale x
set output dir."/lateness.png"
set title sprintf("firing lateness at light load (CDF), receive time - due time, server clock (+-%.3f ms)\n", late_unc).title_run font ",9"
set xlabel "lateness (ms)"
set ylabel "fraction of jobs received"
set format y "%.2f"
set xrange [*:*]
set yrange [0:1.02]
set xtics auto
set key bottom right
set arrow 1 from 5, graph 0 to 5, graph 1 nohead dt 2 lc rgb "#ff8c00" lw 2
set label 1 "target p99 <= 5 ms" at 5, graph 0.5 offset 0.5,0 tc rgb "#ff8c00"
files = system("ls ".dir."/lateness-*.dat 2>/dev/null")
xmax = 6
do for [f in files] {
    stats f using 1 nooutput
    if (STATS_max * 1.05 > xmax) { xmax = STATS_max * 1.05 }
}
set xrange [0:xmax]
# Per-file p50/p99 from the CDF column (nearest rank).
p_of(f, q) = real(system(sprintf("awk '!/^#/ && $2 >= %f {print $1; exit}' %s", q, f)))
plot for [f in files] f using 1:2 with steps lw 2 \
       title system("basename ".f." .dat | sed 's/^lateness-//'") . \
             sprintf(" (pooled runs: p50 %.2f, p99 %.2f ms)", p_of(f, 0.5), p_of(f, 0.99))
