// Package metadata reads a node's seed from the cloud it runs in (DESIGN
// §4): EC2's IMDSv2, GCE's metadata server, Azure's IMDS and OpenStack's
// metadata service, one file each, asked in that fixed order (Sources)
// under one deadline (Find); and an OpenStack config drive's tree
// (ReadConfigDrive), which the init mounts.
//
// A source is absent (nothing answers, or something that is not that
// cloud's service answers) or here. A service that answers but breaks its
// cloud's protocol (an IMDS without the IMDSv2 token flow, a GCE server
// without Metadata-Flavor: Google) is refused (ErrProtocol): its answer
// is never read. IMDSv1 is never used: no GET goes to EC2 without a
// token.
//
// qemu/metadata serves each protocol; the tests run these clients against
// it on loopback.
package metadata

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
)

// DefaultBase is where every one of these clouds serves its metadata.
const DefaultBase = "http://169.254.169.254"

// ErrProtocol means a service answered but broke its cloud's protocol; the
// node refuses it and goes on to the next source.
var ErrProtocol = errors.New("refused: the service breaks its protocol")

// maxBody bounds what the node reads of one answer: a seed is at most
// 1 MiB (seed.MaxSize), and the parser refuses what is over it; base64
// makes it a third longer.
const maxBody = 2 << 20

// Result is what one source told.
type Result struct {
	// Source names the source, as the node logs it ("EC2 IMDSv2").
	Source string
	// ID is the source's short name, as the node API shows it ("ec2").
	ID string
	// Here: the source answered its cloud's protocol, so the node runs in
	// that cloud, whether or not it has a seed.
	Here bool
	// UserData is the user data, the seed YAML; nil when there is none.
	UserData []byte
	// Name is the instance's name, as the cloud tells it; "" when it does
	// not.
	Name string
}

// Client asks the metadata services at one base URL.
type Client struct {
	// Base is the services' base URL, DefaultBase in a VM.
	Base string
	// RequestTimeout bounds each request, so that a source which accepts
	// and never answers leaves time for the next; the overall deadline
	// is the context's.
	RequestTimeout time.Duration
	hc             *http.Client
}

// New returns a client of the services at base (DefaultBase when ""). It
// never goes through a proxy: the services are link-local.
func New(base string) *Client {
	if base == "" {
		base = DefaultBase
	}
	tr := &http.Transport{
		Proxy:             nil,
		DialContext:       (&net.Dialer{Timeout: time.Second}).DialContext,
		DisableKeepAlives: true,
	}
	return &Client{Base: strings.TrimSuffix(base, "/"), RequestTimeout: 2 * time.Second, hc: &http.Client{
		Transport: tr,
		// A metadata service does not redirect; following one could
		// leave the link-local address.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

// answer is one HTTP answer, read whole (up to maxBody).
type answer struct {
	status int
	header http.Header
	body   []byte
}

// errAbsent wraps why a source is not here: nothing answered (refused,
// unreachable, timed out), or what answered is not that cloud's service.
var errAbsent = errors.New("not here")

// errNoService wraps a request that could not even connect: nothing
// listens at the base, for any of the sources.
var errNoService = errors.New(" (nothing listens there)")

// absent is an error wrapping errAbsent.
func absent(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{errAbsent}, args...)...)
}

// do sends one request with the given headers. An error wraps errAbsent
// when nothing answered.
func (c *Client) do(ctx context.Context, method, path string, hdr map[string]string) (answer, error) {
	ctx, cancel := context.WithTimeout(ctx, c.RequestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, c.Base+path, nil)
	if err != nil {
		return answer{}, err
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.hc.Do(req)
	if op := (*net.OpError)(nil); errors.As(err, &op) && op.Op == "dial" {
		return answer{}, fmt.Errorf("%w%w", absent("%s %s: %v", method, path, err), errNoService)
	}
	if err != nil {
		return answer{}, absent("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
	if err != nil {
		return answer{}, fmt.Errorf("%s %s: read the answer: %w", method, path, err)
	}
	if len(body) > maxBody {
		return answer{}, fmt.Errorf("%s %s: the answer is over %d bytes", method, path, maxBody)
	}
	return answer{status: resp.StatusCode, header: resp.Header, body: body}, nil
}

// text is a short answer (a name) with its spaces trimmed, "" unless the
// request got a 200.
func (c *Client) text(ctx context.Context, path string, hdr map[string]string) string {
	a, err := c.do(ctx, http.MethodGet, path, hdr)
	if err != nil || a.status != http.StatusOK {
		return ""
	}
	return strings.TrimSpace(string(a.body))
}

// Source is one metadata source of Sources.
type Source struct {
	Name string
	ID   string
	Read func(ctx context.Context) (Result, error)
}

// Sources are the metadata services in the order a node asks them: EC2
// IMDSv2, GCE, Azure IMDS, OpenStack's metadata service.
func (c *Client) Sources() []Source {
	return []Source{
		{ec2Name, "ec2", c.EC2},
		{gceName, "gce", c.GCE},
		{azureName, "azure", c.Azure},
		{openstackName, "openstack", c.OpenStack},
	}
}

// Find asks the sources in order, all under ctx (the overall deadline),
// and returns the first that is here: the one with a seed, or the first
// cloud that answered without one (its Name may still name the node).
// Later sources are not asked once a cloud answered, nor once a request
// could not connect (they are all at the same base). ok is false when
// none is here. logf gets one line per refused or failed source, and one
// line for those absent.
func Find(ctx context.Context, sources []Source, logf func(string, ...any)) (r Result, ok bool) {
	var absent []string
	defer func() {
		if len(absent) > 0 {
			logf("cloud metadata: absent: %s", strings.Join(absent, "; "))
		}
	}()
	for i, s := range sources {
		if ctx.Err() != nil {
			for _, rest := range sources[i:] {
				absent = append(absent, rest.Name+": not asked (deadline)")
			}
			return Result{}, false
		}
		r, err := s.Read(ctx)
		r.Source, r.ID = s.Name, s.ID
		if len(r.UserData) == 0 {
			r.UserData = nil // an empty user data is none
		}
		switch {
		case errors.Is(err, ErrProtocol):
			logf("cloud metadata: %s: %v; going on to the next source", s.Name, err)
		case errors.Is(err, errNoService):
			// Every source is at the same base: none is there.
			absent = append(absent, s.Name+": "+err.Error())
			for _, rest := range sources[i+1:] {
				absent = append(absent, rest.Name+": not asked")
			}
			return Result{}, false
		case errors.Is(err, errAbsent):
			absent = append(absent, s.Name+": "+err.Error())
		case err != nil:
			logf("cloud metadata: %s: %v; going on to the next source", s.Name, err)
		case r.Here:
			return r, true
		default:
			absent = append(absent, s.Name+": not here")
		}
	}
	return Result{}, false
}
