package metadata

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
)

const azureName = "Azure IMDS"

// azureQuery is the API version and format every request asks for.
const azureQuery = "?api-version=2021-01-01&format=text"

// Azure reads the user data from Azure's IMDS: GET
// /metadata/instance/compute/userData with Metadata: true, whose answer is
// the user data in base64 (empty: no seed). A 400 or 404 there means
// Azure is not here; an answer that is not base64 is refused. The name is
// compute/name.
func (c *Client) Azure(ctx context.Context) (Result, error) {
	hdr := map[string]string{"Metadata": "true"}
	const path = "/metadata/instance/compute/userData"
	a, err := c.do(ctx, http.MethodGet, path+azureQuery, hdr)
	if err != nil {
		return Result{}, err
	}
	switch {
	case a.status == http.StatusBadRequest || a.status == http.StatusNotFound ||
		a.status == http.StatusUnauthorized || a.status == http.StatusForbidden:
		return Result{}, absent("GET %s: %d", path, a.status)
	case a.status != http.StatusOK:
		return Result{}, fmt.Errorf("GET %s: %d", path, a.status)
	}
	r := Result{Here: true}
	if b := trimSpace(a.body); len(b) > 0 {
		r.UserData, err = base64.StdEncoding.DecodeString(string(b))
		if err != nil {
			return Result{}, fmt.Errorf("%w: GET %s: the user data is not base64: %v", ErrProtocol, path, err)
		}
	}
	r.Name = c.text(ctx, "/metadata/instance/compute/name"+azureQuery, hdr)
	return r, nil
}
