package ec2sim

import (
	"fmt"
	"maps"
	"net/http"
	"sync"
)

// Quotas are the account's EBS service quotas in the region. Zero (or a type left out) means unlimited.
type Quotas struct {
	// StorageGiB caps the total size of a volume type's volumes ("Storage for gp3 volumes"; EC2's default
	// is 50 TiB for most types).
	StorageGiB map[string]int64 `json:"storageGiB,omitempty"`
	// Snapshots caps the number of snapshots (EC2's default: 100,000).
	Snapshots int `json:"snapshots,omitempty"`
}

// clone copies q, so a caller changing its map afterwards does not change the quotas in force under the lock.
func (q Quotas) clone() Quotas {
	q.StorageGiB = maps.Clone(q.StorageGiB)
	return q
}

type quotaHolder struct {
	mu sync.Mutex
	q  Quotas
}

func (h *quotaHolder) set(q Quotas) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.q = q.clone()
}

func (h *quotaHolder) get() Quotas {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.q.clone()
}

// SetQuotas changes the account's quotas; volumes and snapshots that exist stay.
func (s *Server) SetQuotas(q Quotas) { s.quotas.set(q) }

// checkVolumeQuota refuses a new volume of typ and size that would take the type's storage over its quota,
// with EC2's VolumeLimitExceeded (with s.mu held).
func (s *Server) checkVolumeQuota(typ string, size int64) *apiError {
	limit := s.quotas.get().StorageGiB[typ]
	if limit <= 0 {
		return nil
	}
	used := int64(0)
	for _, v := range s.st.Volumes {
		if v.Type == typ {
			used += v.Size
		}
	}
	if used+size <= limit {
		return nil
	}
	return newError(http.StatusBadRequest, "VolumeLimitExceeded",
		"You have exceeded your maximum %s storage limit of %s in this region. Please contact AWS Support to request an Elastic Block Store service limit increase.",
		typ, sizeText(limit))
}

// checkSnapshotQuota refuses a snapshot beyond the account's count (with s.mu held).
func (s *Server) checkSnapshotQuota() *apiError {
	limit := s.quotas.get().Snapshots
	if limit <= 0 || len(s.st.Snapshots) < limit {
		return nil
	}
	return newError(http.StatusBadRequest, "SnapshotLimitExceeded", "The maximum number of snapshots has been reached.")
}

func sizeText(gib int64) string {
	if gib%1024 == 0 {
		return fmt.Sprintf("%d TiB", gib/1024)
	}
	return fmt.Sprintf("%d GiB", gib)
}
