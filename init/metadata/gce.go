package metadata

import (
	"context"
	"fmt"
	"net/http"
)

const gceName = "GCE metadata"

// gceFlavorHeader goes both ways: on each request, and on each answer of
// GCE's metadata server.
const gceFlavorHeader = "Metadata-Flavor"

// GCE reads the user data from GCE's metadata server: GET
// /computeMetadata/v1/instance/attributes/user-data with Metadata-Flavor:
// Google (404: no seed). An answer without that header back is not GCE's:
// a 200 without it is refused, anything else means GCE is not here. The
// name is instance/name.
func (c *Client) GCE(ctx context.Context) (Result, error) {
	hdr := map[string]string{gceFlavorHeader: "Google"}
	const path = "/computeMetadata/v1/instance/attributes/user-data"
	a, err := c.do(ctx, http.MethodGet, path, hdr)
	if err != nil {
		return Result{}, err
	}
	if a.header.Get(gceFlavorHeader) != "Google" {
		if a.status == http.StatusOK {
			return Result{}, fmt.Errorf("%w: GET %s answered 200 without Metadata-Flavor: Google", ErrProtocol, path)
		}
		return Result{}, absent("GET %s: %d without Metadata-Flavor: Google", path, a.status)
	}
	r := Result{Here: true}
	switch a.status {
	case http.StatusOK:
		r.UserData = a.body
	case http.StatusNotFound:
	default:
		return Result{}, fmt.Errorf("GET %s: %d", path, a.status)
	}
	// The name's answer must carry the header too.
	if n, err := c.do(ctx, http.MethodGet, "/computeMetadata/v1/instance/name", hdr); err == nil &&
		n.status == http.StatusOK && n.header.Get(gceFlavorHeader) == "Google" {
		r.Name = string(trimSpace(n.body))
	}
	return r, nil
}
