package testutil

import "strings"

// FuzzMap reads "key=value" lines into a map, for fuzz targets whose input is a map (class parameters, volume
// contexts, topology segments): the fuzzer mutates one string. A line without "=" is skipped and a later key
// wins, so every string is some map.
func FuzzMap(s string) map[string]string {
	m := map[string]string{}
	for _, line := range strings.Split(s, "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			m[k] = v
		}
	}
	return m
}
