package cloud

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"
)

// DescribeSnapshots' MaxResults bounds: EC2 refuses fewer than 5 or more than 1000 per page.
const (
	minSnapshotPage = 5
	maxSnapshotPage = 1000
)

// offsetTokenPrefix marks a page token that points into the middle of an EC2 page. Tokens at an EC2 page
// boundary are EC2's NextToken verbatim, as upstream's, so a listing started by either driver can go on
// with the other.
const offsetTokenPrefix = "stowage-offset:"

// ErrInvalidToken is a ListSnapshots starting token that is neither ours nor accepted by EC2.
var ErrInvalidToken = fmt.Errorf("invalid page token: %w", ErrInvalidArgument)

// pagePos is where a listing resumes: the EC2 page fetched with token (and pageSize, so that EC2 cuts the
// same page again), skipping its first skip snapshots.
type pagePos struct {
	token    string
	pageSize int
	skip     int
}

// String is the CSI next_token for the position.
func (p pagePos) String() string {
	if p.skip == 0 {
		return p.token
	}
	return offsetTokenPrefix + strconv.Itoa(p.skip) + ":" + strconv.Itoa(p.pageSize) + ":" + p.token
}

func parsePagePos(tok string) (pagePos, error) {
	rest, ok := strings.CutPrefix(tok, offsetTokenPrefix)
	if !ok {
		return pagePos{token: tok}, nil // EC2's own token (ours or upstream's), checked by EC2
	}
	skipS, rest, ok1 := strings.Cut(rest, ":")
	sizeS, ec2Tok, ok2 := strings.Cut(rest, ":")
	skip, err1 := strconv.Atoi(skipS)
	size, err2 := strconv.Atoi(sizeS)
	if !ok1 || !ok2 || err1 != nil || err2 != nil || skip <= 0 || size < minSnapshotPage ||
		size > maxSnapshotPage || skip >= size {
		return pagePos{}, fmt.Errorf("starting token %q: %w", tok, ErrInvalidToken)
	}
	return pagePos{token: ec2Tok, pageSize: size, skip: skip}, nil
}

// ListSnapshots returns up to maxEntries (0 = all) of the account's snapshots, optionally of one volume,
// from the position token names, and the token of the rest ("" at the end). EC2 pages: each DescribeSnapshots
// asks for what is still wanted, but at least 5, EC2's minimum, and at most 1000. CSI callers may ask for
// fewer than 5 (csi-sanity asks for 2), which upstream refuses; here the rest of such a page is reached
// through a token that names EC2's page and the offset into it.
func (c *Cloud) ListSnapshots(ctx context.Context, volumeID string, maxEntries int, token string) ([]*Snapshot, string, error) {
	if maxEntries < 0 {
		return nil, "", fmt.Errorf("max entries %d: %w", maxEntries, ErrInvalidArgument)
	}
	pos, err := parsePagePos(token)
	if err != nil {
		return nil, "", err
	}
	var out []*Snapshot
	for {
		size := pos.pageSize
		if size == 0 && maxEntries > 0 {
			size = min(max(maxEntries-len(out), minSnapshotPage), maxSnapshotPage)
		}
		in := &ec2.DescribeSnapshotsInput{OwnerIds: []string{"self"}}
		if volumeID != "" {
			in.Filters = []types.Filter{{Name: aws.String("volume-id"), Values: []string{volumeID}}}
		}
		if size > 0 {
			in.MaxResults = aws.Int32(int32(size))
		}
		if pos.token != "" {
			in.NextToken = aws.String(pos.token)
		}
		page, next, err := c.describeSnapshots(ctx, in, false)
		if err != nil {
			if isInvalidToken(err, pos.token) {
				return nil, "", fmt.Errorf("starting token %q: %w: %w", token, ErrInvalidToken, err)
			}
			return nil, "", fmt.Errorf("list snapshots: %w", err)
		}
		if pos.skip > len(page) {
			// The page shrank since the token was issued (snapshots deleted): go on with the next one.
			pos.skip = len(page)
		}
		rest := page[pos.skip:]
		take := len(rest)
		if maxEntries > 0 {
			take = min(take, maxEntries-len(out))
		}
		for _, s := range rest[:take] {
			out = append(out, snapshotFrom(s))
		}
		if take < len(rest) {
			// The caller has enough; the rest of this page comes with the token.
			return out, pagePos{token: pos.token, pageSize: size, skip: pos.skip + take}.String(), nil
		}
		if next == "" {
			return out, "", nil
		}
		pos = pagePos{token: next}
		if maxEntries > 0 && len(out) == maxEntries {
			return out, pos.String(), nil
		}
	}
}

// isInvalidToken tells whether EC2 refused the NextToken: EC2 answers InvalidParameterValue "Invalid value
// '...' for nextToken" (some APIs use InvalidNextToken or InvalidPaginationToken).
func isInvalidToken(err error, token string) bool {
	if token == "" {
		return false
	}
	if isCode(err, "InvalidNextToken", "InvalidPaginationToken") {
		return true
	}
	var apiErr smithy.APIError
	return isCode(err, "InvalidParameterValue") && errors.As(err, &apiErr) &&
		strings.Contains(strings.ToLower(apiErr.ErrorMessage()), "token")
}
