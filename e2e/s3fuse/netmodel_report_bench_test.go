//go:build bench

package s3fuse

import (
	"fmt"
	"strings"
)

// printNetTable prints one network's medians and returns them, one per client.
func printNetTable(title string, clients []netClient, samples [][]netSample) []netSample {
	meds := make([]netSample, len(clients))
	for i := range clients {
		meds[i] = medianSample(samples[i])
	}
	sdk, cores := meds[0], float64(runtimeCPUs())
	fmt.Printf("\n%s\n", title)
	fmt.Printf("%-34s %10s %6s %8s %8s %9s %10s %9s %6s %7s %6s %8s %6s %10s %6s\n", "client", "seq read", "vs SDK",
		"CPU/MiB", "FS CPU", "model CPU", "CPU bound", "1M rand/s", "vs SDK", "files/s", "vs SDK", "ls -l/s", "vs SDK",
		"seq write", "vs SDK")
	for i, c := range clients {
		m := meds[i]
		bound := 0.0
		if m.cpuAll > 0 {
			bound = cores * 1000 / m.cpuAll
		}
		fmt.Printf("%-34s %10s %6s %8s %8s %9s %10s %9s %6s %7s %6s %8s %6s %10s %6s\n", c.name,
			figure(m.seq, "%.0f MiB/s"), ratio(m.seq, sdk.seq),
			figure(m.cpuAll, "%.2f ms"), figure(m.cpuFS, "%.2f ms"), figure(m.cpuNet, "%.2f ms"), figure(bound, "%.0f MiB/s"),
			figure(m.random, "%.1f"), ratio(m.random, sdk.random), figure(m.small, "%.0f"), ratio(m.small, sdk.small),
			figure(m.list, "%.0f"), ratio(m.list, sdk.list), figure(m.write, "%.0f MiB/s"), ratio(m.write, sdk.write))
	}
	fmt.Println("per round, seq read MiB/s | seq write MiB/s:")
	for i, c := range clients {
		fmt.Printf("  %-32s", c.name)
		for _, s := range samples[i] {
			fmt.Printf(" %6.0f", s.seq)
		}
		fmt.Print("  |")
		for _, s := range samples[i] {
			fmt.Printf(" %6.0f", s.write)
		}
		fmt.Println()
	}
	fmt.Println("CPU/MiB: the reader, the FUSE server and versitygw together, per MiB read sequentially; FS CPU: the FUSE")
	fmt.Println("server's part of it; model CPU: the network model's proxy, not included. CPU bound: the cores divided by")
	fmt.Println("CPU/MiB, the most that path could move with the machine to itself (a bound below the model's cap means the")
	fmt.Println("CPU, not the network, is the limit here). ls -l/s: entries listed with their sizes. seq write: timed until")
	fmt.Println("the object is in the bucket (rclone with its cache uploads after close returns; polled every 100 ms).")
	return meds
}

// medianSample is the median of each figure over the rounds (zero when no round finished).
func medianSample(ss []netSample) netSample {
	pick := func(f func(netSample) float64) float64 {
		if len(ss) == 0 {
			return 0
		}
		xs := make([]float64, len(ss))
		for i, s := range ss {
			xs[i] = f(s)
		}
		return median(xs)
	}
	return netSample{
		seq:    pick(func(s netSample) float64 { return s.seq }),
		cpuAll: pick(func(s netSample) float64 { return s.cpuAll }),
		cpuFS:  pick(func(s netSample) float64 { return s.cpuFS }),
		cpuNet: pick(func(s netSample) float64 { return s.cpuNet }),
		random: pick(func(s netSample) float64 { return s.random }),
		small:  pick(func(s netSample) float64 { return s.small }),
		list:   pick(func(s netSample) float64 { return s.list }),
		write:  pick(func(s netSample) float64 { return s.write }),
	}
}

// printNetTargets prints the targets for s3-fuse on one network, met or missed: ahead of every peer
// on every workload, CPU per MiB no more than the best peer's, and (on the model) at least 0.9x the SDK.
func printNetTargets(clients []netClient, meds []netSample, model bool) {
	var ours netSample
	var peers []string
	var peer []netSample
	for i, c := range clients {
		switch {
		case c.name == "s3-fuse":
			ours = meds[i]
		case isPeer(c.name):
			peers, peer = append(peers, c.name), append(peer, meds[i])
		}
	}
	sdk := meds[0]
	verdict := func(ok bool) string {
		if ok {
			return "pass"
		}
		return "MISS"
	}
	fmt.Println("targets (printed, not asserted):")
	workloads := []struct {
		name string
		of   func(netSample) float64
	}{
		{"sequential read", func(s netSample) float64 { return s.seq }},
		{"random 1 MiB reads", func(s netSample) float64 { return s.random }},
		{"small files", func(s netSample) float64 { return s.small }},
		{"listing (ls -l)", func(s netSample) float64 { return s.list }},
		{"sequential write", func(s netSample) float64 { return s.write }},
	}
	for _, w := range workloads {
		best, bestName := 0.0, ""
		for i, p := range peer {
			if v := w.of(p); v > best {
				best, bestName = v, peers[i]
			}
		}
		line := fmt.Sprintf("  %-20s vs best peer (%s) %s %s", w.name, bestName, ratio(w.of(ours), best), verdict(w.of(ours) > best))
		if model {
			line += fmt.Sprintf("; vs SDK %s (>= 0.90x) %s", ratio(w.of(ours), w.of(sdk)), verdict(w.of(ours) >= 0.9*w.of(sdk)))
		}
		fmt.Println(line)
	}
	leanest, leanName := 0.0, ""
	for i, p := range peer {
		if p.cpuAll > 0 && (leanest == 0 || p.cpuAll < leanest) {
			leanest, leanName = p.cpuAll, peers[i]
		}
	}
	fmt.Printf("  %-20s %.2f ms/MiB vs the leanest peer's (%s) %.2f ms/MiB %s\n", "CPU per MiB read", ours.cpuAll, leanName, leanest,
		verdict(ours.cpuAll <= leanest))
	fmt.Println(strings.Repeat("-", 40))
}
