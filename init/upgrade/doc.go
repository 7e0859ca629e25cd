// Package upgrade is the init's upgrade agent (DESIGN §7): it pulls an
// etcdbox OCI image by digest, checks its signature, writes its kernel and
// initramfs into the slot that is not booted, held or armed for the next
// boot (Agent), and decides when a slot on probation is blessed or failed
// (Gate). The init wires it to the node API and to the node's etcd; the
// slot files themselves are package slot's.
//
// # Fetch
//
// The image is the one `etcdbox build --format oci` makes: the container
// root in a gzip layer, then a last, uncompressed layer holding
// /boot/vmlinuz, /boot/initrd and /boot/cmdline, the image's extra kernel
// command-line arguments (images built before that file existed have
// none; images built before the boot layer existed have all of it in
// their one layer). The agent reads layers from the last one back and
// stops once it has all three files, so a node pulls the boot layer
// only, and never spends its CPU inflating the container root (the
// kernel and initrd are compressed already).
//
// Only a reference pinned by digest is accepted, so what is staged is
// exactly what was asked for. go-containerregistry verifies a blob
// against its digest when it is read to its end, so every layer the agent
// uses is read to its end, and a mismatch fails the pull.
package upgrade
