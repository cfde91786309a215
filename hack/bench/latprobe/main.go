// The latency probe of hack/bench.sh: N keep-alive TLS connections, each posting the review again
// as soon as its response is read (a closed loop, as the API server's few connections to a
// webhook are), every request's latency kept and the percentiles printed. Its figures obey
// Little's law (mean latency x requests/s = connections); wrk's latency percentiles against
// shmguard do not (docs/performance.md), so the tail is read from here and throughput from wrk.
package main

import (
	"bytes"
	"crypto/tls"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"sync"
	"time"
)

func main() {
	url := flag.String("url", "", "where to POST")
	conns := flag.Int("c", 4, "connections")
	dur := flag.Duration("d", 6*time.Second, "how long")
	body := flag.String("body", "", "file with the request body")
	flag.Parse()
	payload, err := os.ReadFile(*body)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	var mu sync.Mutex
	var all []time.Duration
	var wg sync.WaitGroup
	stop := time.Now().Add(*dur)
	for i := 0; i < *conns; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tr := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, MaxIdleConnsPerHost: 1, MaxConnsPerHost: 1}
			cl := &http.Client{Transport: tr}
			var mine []time.Duration
			for time.Now().Before(stop) {
				t0 := time.Now()
				resp, err := cl.Post(*url, "application/json", bytes.NewReader(payload))
				if err != nil {
					fmt.Fprintln(os.Stderr, err)
					os.Exit(1)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				mine = append(mine, time.Since(t0))
			}
			mu.Lock()
			all = append(all, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	p := func(q float64) int64 { return all[int(q*float64(len(all)-1))].Microseconds() }
	var sum time.Duration
	for _, d := range all {
		sum += d
	}
	if len(all) == 0 {
		fmt.Fprintln(os.Stderr, "no request completed")
		os.Exit(1)
	}
	fmt.Printf("LAT requests=%d rps=%.0f mean_us=%d p50_us=%d p90_us=%d p99_us=%d max_us=%d\n", len(all),
		float64(len(all))/dur.Seconds(), (sum / time.Duration(len(all))).Microseconds(), p(0.5), p(0.9), p(0.99), all[len(all)-1].Microseconds())
}
