package server

import (
	"net/http"
	"strings"

	"github.com/etcdbox/etcdbox/nodeapi"
)

func (s *Server) caRotation(w http.ResponseWriter, _ *http.Request) error {
	rot, err := s.cfg.Node.CARotation()
	if err != nil {
		return nodeError("CA rotation", err)
	}
	writeJSON(w, http.StatusOK, rot)
	return nil
}

func (s *Server) rotateCA(w http.ResponseWriter, r *http.Request) error {
	var req nodeapi.CARotationRequest
	if err := decodeBody(w, r, &req, false); err != nil {
		return err
	}
	switch {
	case nodeapi.PhaseIndex(req.Phase) < 0:
		return errorf(http.StatusBadRequest, "request body: phase: %q is not one of %s", req.Phase, strings.Join(nodeapi.RotationPhases, ", "))
	case strings.TrimSpace(req.NewCA) == "":
		return errorf(http.StatusBadRequest, "request body: newCA: required (the new root's certificate, PEM)")
	case req.Phase == nodeapi.RotationReissue && (req.NodeCACert == "" || req.NodeCAKey == ""):
		return errorf(http.StatusBadRequest, "request body: nodeCACert and nodeCAKey: required in phase %s", nodeapi.RotationReissue)
	}
	rot, err := s.cfg.Node.RotateCA(r.Context(), req)
	if err != nil {
		return nodeError("CA rotation", err)
	}
	writeJSON(w, http.StatusOK, rot)
	return nil
}
