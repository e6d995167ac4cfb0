package provision

import (
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
)

// spreadOffset is where an immediate-binding claim's preferred topology list starts among n sorted segments.
// It is upstream's StatefulSet spreading (external-provisioner's getPVCNameHashAndIndexOffset, the same as the
// in-tree volume plugins'), so a StatefulSet's volumes land in the same zones under Stowage as under upstream:
// a name ending in "-<number>" (StatefulSet claims are "<template>-<set>-<ordinal>") hashes only the part between
// its last two dashes (the set's name) and adds the ordinal, so replicas 0, 1, 2, ... of one set go round-robin
// over the zones, and all claims of one replica (one per volumeClaimTemplate) prefer the same zone, where its pod
// can mount them all. Other names are hashed whole. The hash is 32-bit FNV-1, the sum wraps as upstream's does.
func spreadOffset(claimName string, n int) int {
	hashed, ordinal := claimName, uint32(0)
	if i := strings.LastIndexByte(claimName, '-'); i >= 0 {
		if id, err := strconv.ParseUint(claimName[i+1:], 10, 32); err == nil {
			ordinal = uint32(id)
			hashed = claimName[:i]
			if j := strings.LastIndexByte(hashed, '-'); j >= 0 {
				hashed = hashed[j+1:]
			}
		}
	}
	h := fnv.New32()
	h.Write([]byte(hashed)) // a hash.Hash's Write never fails
	return int((h.Sum32() + ordinal) % uint32(n))
}

// compareSegments orders segments as upstream orders its topology terms before choosing the preferred start:
// fewer keys first, then key by key (keys sorted) on the key and then the value. Sharing the order is what makes
// spreadOffset pick the same segment as upstream.
func compareSegments(a, b segment) int {
	if len(a) != len(b) {
		return len(a) - len(b)
	}
	ka, kb := sortedKeys(a), sortedKeys(b)
	for i := range ka {
		if c := strings.Compare(ka[i], kb[i]); c != 0 {
			return c
		}
		if c := strings.Compare(a[ka[i]], b[kb[i]]); c != 0 {
			return c
		}
	}
	return 0
}

func sortedKeys(s segment) []string {
	keys := make([]string, 0, len(s))
	for k := range s {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
