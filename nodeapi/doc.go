// Package nodeapi is the wire format of the etcdbox node API (DESIGN §8) and
// its Go client. The CLI and the init both import it; it links the standard
// library, package pki and go-containerregistry's name parser only, so it
// fits either side of the import rules. Its server, which only the init
// links, is the subpackage nodeapi/server.
//
// The API is HTTPS with mutual TLS on its own port (DefaultPort, the seed's
// api.port). The server presents the node's server certificate; clients
// present a certificate from the cluster CA. Read-only endpoints accept any
// such certificate; mutating ones require the admin certificate (common name
// pki.AdminCommonName) made by `etcdbox pki init`. Bodies are JSON, except
// logs, which are plain text. Errors are JSON objects {"error": "..."} that
// name what was wrong.
//
//	GET  /v1/status          Status
//	GET  /v1/logs?lines=N    text/plain, the last N lines (default DefaultLogLines)
//	POST /v1/reboot          202 Accepted, then the node reboots (admin)
//	POST /v1/upgrade         {"image": "registry.example/etcdbox@sha256:..."}: 202, stages asynchronously (admin);
//	                         with "hold": true the slot is staged held and boots only once armed
//	POST /v1/upgrade/arm     {"image": "..."}: UpgradeProgress, arms the held slot holding that image (admin)
//	GET  /v1/upgrade         UpgradeProgress
//	GET  /v1/formation       Formation (any node certificate; served before etcd starts)
//	POST /v1/formation       {"without": ["n3"]}: Formation, form without those members (admin)
//
// It is plain enough for curl:
//
//	curl --cacert pki/ca.crt --cert pki/admin.crt --key pki/admin.key https://127.0.0.1:9379/v1/status
//
// From Go:
//
//	c, err := nodeapi.NewClient("https://127.0.0.1:9379", "pki/")
//	st, err := c.Status(ctx)
package nodeapi
