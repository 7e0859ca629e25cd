// Package container tests etcdbox's container form factor: the OCI image
// that `etcdbox build --format oci` writes, run by podman as three
// containers that form one cluster, with /init as the entrypoint, the
// seed from a file or $ETCDBOX_SEED, and data on a volume. It needs root
// and podman (make test has both); it boots no VM, so it runs in the
// unit tier.
package container
