package s3client

import (
	"bytes"
	"context"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"

	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// maxErrorBody bounds what is read of an error answer to find the bucket's region; S3's are under 1 KiB.
const maxErrorBody = 64 << 10

// WrongRegionError is S3's answer that the bucket lives in another region than the one the request was
// signed for.
type WrongRegionError struct {
	// Region is the bucket's region, as S3 named it.
	Region string
	// Status and Code are the answer's HTTP status and S3 error code ("" for a HEAD, which has no body).
	Status int
	Code   string
}

func (e *WrongRegionError) Error() string {
	code := e.Code
	if code == "" {
		code = http.StatusText(e.Status)
	}
	return fmt.Sprintf("the bucket is in region %s (HTTP %d %s)", e.Region, e.Status, code)
}

// errorBody is the part of S3's error XML that names the bucket's region.
type errorBody struct {
	Code   string
	Region string
}

// detectWrongRegion turns S3's region redirects into a WrongRegionError: a 301 PermanentRedirect (or 307)
// naming the region, a 400 AuthorizationHeaderMalformed naming the expected region, or either status with
// the x-amz-bucket-region header (all a HEAD can carry). It runs innermost, on the raw answer, because
// the SDK's error types drop the Region element of the body.
func detectWrongRegion(st *middleware.Stack) error {
	return st.Deserialize.Add(middleware.DeserializeMiddlewareFunc("S3FuseWrongRegion",
		func(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (middleware.DeserializeOutput, middleware.Metadata, error) {
			out, md, err := next.HandleDeserialize(ctx, in)
			if err != nil {
				return out, md, err
			}
			if resp, ok := out.RawResponse.(*smithyhttp.Response); ok {
				// The body stays for the SDK's handler, which drains and closes it.
				if wrong := wrongRegion(resp); wrong != nil {
					return out, md, wrong
				}
			}
			return out, md, nil
		}), middleware.After)
}

// wrongRegion reads a redirect's region from resp, or returns nil and leaves resp as it was for the
// SDK's own error handling.
func wrongRegion(resp *smithyhttp.Response) *WrongRegionError {
	switch resp.StatusCode {
	case http.StatusMovedPermanently, http.StatusTemporaryRedirect, http.StatusBadRequest:
	default:
		return nil
	}
	var body errorBody
	if resp.Body != nil {
		peek, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		resp.Body = peekedBody{Reader: io.MultiReader(bytes.NewReader(peek), resp.Body), Closer: resp.Body}
		// A body that is not S3's error XML names no region: the SDK reports it.
		_ = xml.Unmarshal(peek, &body)
	}
	// A 400 is a redirect only when it says the signature's region is wrong; other 400s (a bad argument)
	// may carry the header too.
	if resp.StatusCode == http.StatusBadRequest && body.Code != "" && body.Code != "AuthorizationHeaderMalformed" {
		return nil
	}
	region := body.Region
	if region == "" {
		region = resp.Header.Get("x-amz-bucket-region")
	}
	if region == "" {
		return nil
	}
	return &WrongRegionError{Region: region, Status: resp.StatusCode, Code: body.Code}
}

// peekedBody is a response body whose first bytes were read ahead and put back.
type peekedBody struct {
	io.Reader
	io.Closer
}
