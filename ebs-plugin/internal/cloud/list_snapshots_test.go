package cloud

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"testing"
)

// TestListSnapshotsPagesServerSide checks max_entries and the token go to EC2 as MaxResults and NextToken,
// one DescribeSnapshots call per page, instead of listing everything and slicing.
func TestListSnapshotsPagesServerSide(t *testing.T) {
	const total = 12
	c, h, _ := newTestCloud(t, false, map[string]func(url.Values) (string, string, string){
		"DescribeSnapshots": func(f url.Values) (string, string, string) {
			if f.Get("Owner.1") != "self" {
				return "", "MissingParameter", "want Owner.1=self"
			}
			if f.Get("Filter.1.Name") != "volume-id" || f.Get("Filter.1.Value.1") != "vol-1" {
				return "", "MissingParameter", "want the volume-id filter"
			}
			max := total
			if v := f.Get("MaxResults"); v != "" {
				max, _ = strconv.Atoi(v)
				if max < 5 || max > 1000 {
					return "", "InvalidParameterValue", fmt.Sprintf("Value ( %d ) for parameter maxResults is invalid.", max)
				}
			}
			off := 0
			if tok := f.Get("NextToken"); tok != "" {
				n, err := strconv.Atoi(strings.TrimPrefix(tok, "t"))
				if err != nil || !strings.HasPrefix(tok, "t") {
					return "", "InvalidParameterValue", fmt.Sprintf("Invalid value '%s' for nextToken.", tok)
				}
				off = n
			}
			var b strings.Builder
			b.WriteString("<snapshotSet>")
			end := min(off+max, total)
			for i := off; i < end; i++ {
				fmt.Fprintf(&b, "<item><snapshotId>snap-%02d</snapshotId><volumeId>vol-1</volumeId><volumeSize>1</volumeSize><status>completed</status></item>", i)
			}
			b.WriteString("</snapshotSet>")
			if end < total {
				fmt.Fprintf(&b, "<nextToken>t%d</nextToken>", end)
			}
			return b.String(), "", ""
		},
	})
	ctx := context.Background()

	page, next, err := c.ListSnapshots(ctx, "vol-1", 5, "")
	if err != nil || len(page) != 5 || page[0].SnapshotID != "snap-00" || next != "t5" {
		t.Fatalf("page 1: %d %q %v", len(page), next, err)
	}
	if got := h.call("DescribeSnapshots", 0).Get("MaxResults"); got != "5" {
		t.Fatalf("MaxResults %q", got)
	}
	page, next, err = c.ListSnapshots(ctx, "vol-1", 5, next)
	if err != nil || len(page) != 5 || page[0].SnapshotID != "snap-05" || next != "t10" {
		t.Fatalf("page 2: %d %q %v", len(page), next, err)
	}
	if got := h.call("DescribeSnapshots", 1).Get("NextToken"); got != "t5" {
		t.Fatalf("NextToken %q", got)
	}
	page, next, err = c.ListSnapshots(ctx, "vol-1", 5000, next)
	if err != nil || len(page) != 2 || next != "" {
		t.Fatalf("last page: %d %q %v", len(page), next, err)
	}
	if got := h.call("DescribeSnapshots", 2).Get("MaxResults"); got != "1000" {
		t.Fatalf("MaxResults above EC2's limit sent as %q, want 1000", got)
	}
	if h.count("DescribeSnapshots") != 3 {
		t.Fatalf("%d DescribeSnapshots calls for 3 pages", h.count("DescribeSnapshots"))
	}
	page, next, err = c.ListSnapshots(ctx, "vol-1", 0, "")
	if err != nil || len(page) != total || next != "" || h.call("DescribeSnapshots", 3).Get("MaxResults") != "" {
		t.Fatalf("max 0: %d %q %v", len(page), next, err)
	}

	_, _, err = c.ListSnapshots(ctx, "vol-1", 0, "bogus")
	if !errors.Is(err, ErrInvalidToken) || !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("bad token: %v", err)
	}
	calls := h.count("DescribeSnapshots")
	for _, n := range []int{1, 4, -1} {
		if _, _, err := c.ListSnapshots(ctx, "vol-1", n, ""); !errors.Is(err, ErrInvalidMaxResults) {
			t.Fatalf("max %d: %v", n, err)
		}
	}
	if h.count("DescribeSnapshots") != calls {
		t.Fatal("an impossible page size reached EC2")
	}
}
