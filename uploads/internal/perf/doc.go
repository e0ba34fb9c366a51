// Package perf holds the performance benchmarks of berth-uploads (issue 2): PUT
// throughput of a 1 GiB file against dd on the same disk with the service's peak memory,
// GET /v1/uploads latency over 10,000 uploads in SQLite, and 200 concurrent clients on
// loopback. They run only with BERTH_BENCH=1 (hack/bench.sh sets it):
//
//	cd uploads && BERTH_BENCH=1 go test -run '^$' -bench . -benchtime 1x ./internal/perf/
//
// Each benchmark fails when its target is missed and reports its figures as benchmark
// metrics. BERTH_BENCH_DIR chooses the disk (default the system temporary directory);
// BERTH_BENCH_DURATION the length of the concurrency run (default 30s).
package perf
