package metadata

import (
	"context"
	"fmt"
	"net/http"
	"strings"
)

const ec2Name = "EC2 IMDSv2"

// The IMDSv2 headers: the token's TTL on its PUT, the token on each GET.
const (
	ec2TTLHeader   = "X-aws-ec2-metadata-token-ttl-seconds"
	ec2TokenHeader = "X-aws-ec2-metadata-token"
)

// EC2 reads the user data from EC2's instance metadata service, IMDSv2
// only: PUT /latest/api/token, then GET /latest/user-data with the token
// (404: no seed). A service that answers the PUT with anything but a
// token (401, 403, 405, or an empty token) has no token flow: it is
// refused, never asked without one. A 400 or 404 there is some other
// service (Azure's, GCE's, a web server), so EC2 is not here.
//
// The name is the instance's Name tag (when the instance lets metadata
// show its tags), else its local host name, else its ID.
func (c *Client) EC2(ctx context.Context) (Result, error) {
	a, err := c.do(ctx, http.MethodPut, "/latest/api/token", map[string]string{ec2TTLHeader: "300"})
	if err != nil {
		return Result{}, err
	}
	token := strings.TrimSpace(string(a.body))
	switch {
	case a.status == http.StatusBadRequest || a.status == http.StatusNotFound || a.header.Get(gceFlavorHeader) != "":
		return Result{}, absent("PUT /latest/api/token: %d: not an IMDS", a.status)
	case a.status != http.StatusOK:
		return Result{}, fmt.Errorf("%w: PUT /latest/api/token answered %d, not an IMDSv2 token (IMDSv1 is never used)", ErrProtocol, a.status)
	case token == "" || strings.ContainsAny(token, "\r\n"):
		return Result{}, fmt.Errorf("%w: PUT /latest/api/token answered 200 without a token (IMDSv1 is never used)", ErrProtocol)
	}
	hdr := map[string]string{ec2TokenHeader: token}
	a, err = c.do(ctx, http.MethodGet, "/latest/user-data", hdr)
	if err != nil {
		return Result{}, err
	}
	r := Result{Here: true}
	switch a.status {
	case http.StatusOK:
		r.UserData = a.body
	case http.StatusNotFound:
	case http.StatusUnauthorized:
		return Result{}, fmt.Errorf("%w: GET /latest/user-data: 401 with the token it gave", ErrProtocol)
	default:
		return Result{}, fmt.Errorf("GET /latest/user-data: %d", a.status)
	}
	for _, p := range []string{"tags/instance/Name", "local-hostname", "instance-id"} {
		if r.Name = c.text(ctx, "/latest/meta-data/"+p, hdr); r.Name != "" {
			break
		}
	}
	return r, nil
}
