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

// snapshotPager answers DescribeSnapshots for total snapshots of vol-1 as EC2 does: MaxResults 5 to 1000 (0 or
// absent = everything), NextToken "t<offset>", anything else refused as EC2 refuses a token.
func snapshotPager(total int) func(url.Values) (string, string, string) {
	return func(f url.Values) (string, string, string) {
		if f.Get("Owner.1") != "self" {
			return "", "MissingParameter", "want Owner.1=self"
		}
		if f.Get("Filter.1.Name") != "volume-id" || f.Get("Filter.1.Value.1") != "vol-1" {
			return "", "MissingParameter", "want the volume-id filter"
		}
		limit := total
		if v := f.Get("MaxResults"); v != "" && v != "0" {
			limit, _ = strconv.Atoi(v)
			if limit < 5 || limit > 1000 {
				return "", "InvalidParameterValue", fmt.Sprintf("Value ( %d ) for parameter maxResults is invalid.", limit)
			}
		}
		off := 0
		if tok := f.Get("NextToken"); tok != "" {
			n, err := strconv.Atoi(strings.TrimPrefix(tok, "t"))
			if err != nil || !strings.HasPrefix(tok, "t") || n <= 0 || n >= total {
				return "", "InvalidParameterValue", fmt.Sprintf("Invalid value '%s' for nextToken.", tok)
			}
			off = n
		}
		var b strings.Builder
		b.WriteString("<snapshotSet>")
		end := min(off+limit, total)
		for i := off; i < end; i++ {
			fmt.Fprintf(&b, "<item><snapshotId>snap-%02d</snapshotId><volumeId>vol-1</volumeId><volumeSize>1</volumeSize><status>completed</status></item>", i)
		}
		b.WriteString("</snapshotSet>")
		if end < total {
			fmt.Fprintf(&b, "<nextToken>t%d</nextToken>", end)
		}
		return b.String(), "", ""
	}
}

// TestListSnapshotsPagesServerSide walks every page for each max_entries, including 1 to 4, which EC2 cannot
// serve as a page size: the pages must join to every snapshot once, in EC2's order, none longer than asked,
// each DescribeSnapshots asking EC2 for a page of 5 to 1000 and never listing more than the walk needs.
func TestListSnapshotsPagesServerSide(t *testing.T) {
	const total = 12
	for _, tc := range []struct {
		maxEntries int
		pages      int // CSI pages
		calls      int // DescribeSnapshots calls of the whole walk
		firstMax   string
	}{
		{maxEntries: 0, pages: 1, calls: 1, firstMax: ""},
		{maxEntries: 1, pages: 12, calls: 12, firstMax: "5"},
		{maxEntries: 2, pages: 6, calls: 7, firstMax: "5"}, // page 3 spans two EC2 pages (4, then 5)
		{maxEntries: 4, pages: 3, calls: 5, firstMax: "5"}, // pages 2 and 3 each span two EC2 pages
		{maxEntries: 5, pages: 3, calls: 3, firstMax: "5"},
		{maxEntries: 7, pages: 2, calls: 2, firstMax: "7"},
		{maxEntries: 12, pages: 1, calls: 1, firstMax: "12"},
		{maxEntries: 13, pages: 1, calls: 1, firstMax: "13"},
		{maxEntries: 5000, pages: 1, calls: 1, firstMax: "1000"},
	} {
		t.Run(strconv.Itoa(tc.maxEntries), func(t *testing.T) {
			c, h, _ := newTestCloud(t, false, map[string]func(url.Values) (string, string, string){
				"DescribeSnapshots": snapshotPager(total),
			})
			ctx := context.Background()
			var got []string
			tok, pages := "", 0
			for {
				page, next, err := c.ListSnapshots(ctx, "vol-1", tc.maxEntries, tok)
				if err != nil {
					t.Fatalf("page %d (token %q): %v", pages+1, tok, err)
				}
				pages++
				if tc.maxEntries > 0 && len(page) > tc.maxEntries {
					t.Fatalf("page %d has %d snapshots, max_entries %d", pages, len(page), tc.maxEntries)
				}
				for _, s := range page {
					got = append(got, s.SnapshotID)
				}
				if next == "" {
					break
				}
				if pages > total {
					t.Fatalf("no end after %d pages, token %q", pages, next)
				}
				tok = next
			}
			var want []string
			for i := range total {
				want = append(want, fmt.Sprintf("snap-%02d", i))
			}
			if strings.Join(got, ",") != strings.Join(want, ",") {
				t.Fatalf("walk listed %v", got)
			}
			if pages != tc.pages || h.count("DescribeSnapshots") != tc.calls {
				t.Fatalf("%d pages with %d DescribeSnapshots, want %d and %d", pages, h.count("DescribeSnapshots"), tc.pages, tc.calls)
			}
			if m := h.call("DescribeSnapshots", 0).Get("MaxResults"); m != tc.firstMax {
				t.Fatalf("first MaxResults %q, want %q", m, tc.firstMax)
			}
		})
	}
}

// TestListSnapshotsTokens checks the tokens: at an EC2 page boundary the token is EC2's NextToken verbatim
// (so upstream's tokens work here and ours there), inside a page it names EC2's page, its size and the offset.
func TestListSnapshotsTokens(t *testing.T) {
	c, h, _ := newTestCloud(t, false, map[string]func(url.Values) (string, string, string){
		"DescribeSnapshots": snapshotPager(12),
	})
	ctx := context.Background()
	for _, tc := range []struct {
		maxEntries int
		token      string
		first      string
		next       string
		err        error
	}{
		{maxEntries: 5, token: "", first: "snap-00", next: "t5"},
		{maxEntries: 5, token: "t5", first: "snap-05", next: "t10"}, // upstream's token, EC2's own
		{maxEntries: 2, token: "", first: "snap-00", next: offsetTokenPrefix + "2:5:"},
		{maxEntries: 2, token: offsetTokenPrefix + "2:5:", first: "snap-02", next: offsetTokenPrefix + "4:5:"},
		{maxEntries: 3, token: offsetTokenPrefix + "4:5:", first: "snap-04", next: offsetTokenPrefix + "2:5:t5"},
		{maxEntries: 2, token: offsetTokenPrefix + "3:5:t10", first: "", next: ""}, // page shrank: nothing left
		{maxEntries: 0, token: offsetTokenPrefix + "1:5:t5", first: "snap-06", next: ""},
		{maxEntries: 2, token: "bogus", err: ErrInvalidToken},
		{maxEntries: 2, token: offsetTokenPrefix + "x:5:", err: ErrInvalidToken},
		{maxEntries: 2, token: offsetTokenPrefix + "5:5:", err: ErrInvalidToken},
		{maxEntries: 2, token: offsetTokenPrefix + "1:4:", err: ErrInvalidToken},
		{maxEntries: 2, token: offsetTokenPrefix + "1:5", err: ErrInvalidToken},
		{maxEntries: -1, err: ErrInvalidArgument},
	} {
		page, next, err := c.ListSnapshots(ctx, "vol-1", tc.maxEntries, tc.token)
		if tc.err != nil {
			if !errors.Is(err, tc.err) || !errors.Is(err, ErrInvalidArgument) {
				t.Errorf("max %d token %q: error %v, want %v", tc.maxEntries, tc.token, err, tc.err)
			}
			continue
		}
		first := ""
		if len(page) > 0 {
			first = page[0].SnapshotID
		}
		if err != nil || first != tc.first || next != tc.next {
			t.Errorf("max %d token %q: first %q next %q err %v, want %q %q", tc.maxEntries, tc.token, first, next, err, tc.first, tc.next)
		}
	}
	for i := range h.count("DescribeSnapshots") {
		if m := h.call("DescribeSnapshots", i).Get("MaxResults"); m != "" {
			if n, _ := strconv.Atoi(m); n < 5 || n > 1000 {
				t.Fatalf("call %d asked EC2 for a page of %s", i, m)
			}
		}
	}
}
