package vnet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"time"
)

// Status is a network's state, as the control API's GET /v1/status
// returns it.
type Status struct {
	Dir       string       `json:"dir,omitempty"`
	Subnet    string       `json:"subnet"`
	Gateway   netip.Addr   `json:"gateway"`
	Domain    string       `json:"domain"`
	SRVName   string       `json:"srvName,omitempty"`
	Hosts     []Host       `json:"hosts"`
	SRV       []SRV        `json:"srv"` // the SetSRV override; null when generated
	Partition [][]string   `json:"partition,omitempty"`
	OneWay    []OneWay     `json:"oneWay,omitempty"`
	Impaired  []Impairment `json:"impaired,omitempty"` // the impaired hosts, one each
	Forwards  []Forward    `json:"forwards"`
	Stats     Stats        `json:"stats"`
}

// Status returns the network's state.
func (n *Network) Status() Status {
	s := Status{
		Dir: n.cfg.Dir, Subnet: n.cfg.prefix.String(), Gateway: n.cfg.gateway,
		Domain: n.cfg.Domain, SRVName: n.cfg.SRVName,
		Hosts: n.Hosts(), Forwards: n.Forwards(), Stats: n.Stats(),
	}
	n.mu.Lock()
	s.SRV = slices.Clone(n.srv)
	for _, g := range n.groups {
		s.Partition = append(s.Partition, slices.Clone(g))
	}
	for _, c := range n.oneWay {
		s.OneWay = append(s.OneWay, OneWay{From: slices.Clone(c.From), To: slices.Clone(c.To)})
	}
	s.Impaired = n.impairments()
	n.mu.Unlock()
	return s
}

// Serve runs a network for cfg (cfg.Dir is required) with its control API
// on ControlSocket(cfg.Dir), until ctx ends or a client calls Shutdown.
// The switch socket listens before the control socket does, so once
// Client.Wait returns, VMs can start. This is the body of the detached
// process that keeps a cluster's network up after `etcdbox cluster up`
// returns.
func Serve(ctx context.Context, cfg Config) error {
	if cfg.Dir == "" {
		return errors.New("network: serve: no directory for the sockets")
	}
	n, err := New(cfg)
	if err != nil {
		return err
	}
	if cfg.Started != nil {
		if err := cfg.Started(n); err != nil {
			n.Close()
			return err
		}
	}
	ln, err := listenUnix(ControlSocket(n.cfg.Dir))
	if err != nil {
		n.Close()
		return fmt.Errorf("network: control api: %w", err)
	}
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	closed := make(chan struct{})
	srv := &http.Server{Handler: n.handler(stop, closed), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	<-ctx.Done()
	// The network closes first, so that Shutdown's answer means it is
	// gone; then the API stops after that answer.
	err = n.Close()
	close(closed)
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	srv.Shutdown(sctx)
	n.cfg.Logf("network: stopped")
	return err
}

// apiError is the control API's error body; Code names the sentinel
// error a client turns it back into.
type apiError struct {
	Error string `json:"error"`
	Code  string `json:"code,omitempty"`
}

var sentinels = map[string]error{
	"unknown-host": ErrUnknownHost,
	"no-forward":   ErrNoForward,
	"conflict":     ErrConflict,
	"closed":       ErrClosed,
}

// handler is the control API. stop ends Serve; closed is closed once
// the network has stopped.
func (n *Network) handler(stop func(), closed <-chan struct{}) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/status", func(w http.ResponseWriter, r *http.Request) {
		reply(w, n.Status(), nil)
	})
	mux.HandleFunc("GET /v1/stats", func(w http.ResponseWriter, r *http.Request) {
		reply(w, n.Stats(), nil)
	})
	mux.HandleFunc("POST /v1/hosts", func(w http.ResponseWriter, r *http.Request) {
		var h Host
		if !decode(w, r, &h) {
			return
		}
		reply(w, nil, n.AddHost(h))
	})
	mux.HandleFunc("DELETE /v1/hosts/{name}", func(w http.ResponseWriter, r *http.Request) {
		reply(w, nil, n.RemoveHost(r.PathValue("name")))
	})
	mux.HandleFunc("POST /v1/forwards", func(w http.ResponseWriter, r *http.Request) {
		var f struct {
			Host  string         `json:"host"`
			Guest netip.AddrPort `json:"guest"`
		}
		if !decode(w, r, &f) {
			return
		}
		if f.Host == "" {
			f.Host = "127.0.0.1:0"
		}
		host, err := n.Forward(f.Host, f.Guest)
		reply(w, Forward{Host: host, Guest: f.Guest}, err)
	})
	mux.HandleFunc("DELETE /v1/forwards/{host}", func(w http.ResponseWriter, r *http.Request) {
		host, err := netip.ParseAddrPort(r.PathValue("host"))
		if err != nil {
			writeError(w, http.StatusBadRequest, err)
			return
		}
		reply(w, nil, n.RemoveForward(host))
	})
	mux.HandleFunc("PUT /v1/srv", func(w http.ResponseWriter, r *http.Request) {
		var srv []SRV // JSON null: back to generated records
		if !decode(w, r, &srv) {
			return
		}
		reply(w, nil, n.SetSRV(srv))
	})
	mux.HandleFunc("PUT /v1/partition", func(w http.ResponseWriter, r *http.Request) {
		var groups [][]string
		if !decode(w, r, &groups) {
			return
		}
		reply(w, nil, n.Partition(groups...))
	})
	mux.HandleFunc("POST /v1/one-way", func(w http.ResponseWriter, r *http.Request) {
		var c OneWay
		if !decode(w, r, &c) {
			return
		}
		reply(w, nil, n.CutOneWay(c))
	})
	mux.HandleFunc("POST /v1/impair", func(w http.ResponseWriter, r *http.Request) {
		var im Impairment
		if !decode(w, r, &im) {
			return
		}
		reply(w, nil, n.Impair(im))
	})
	mux.HandleFunc("POST /v1/shutdown", func(w http.ResponseWriter, r *http.Request) {
		stop()
		select {
		case <-closed:
			w.WriteHeader(http.StatusNoContent)
		case <-r.Context().Done():
		}
	})
	return mux
}

func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		writeError(w, http.StatusBadRequest, fmt.Errorf("request body: %w", err))
		return false
	}
	return true
}

// reply writes v as JSON (204 for nil), or err with a status and code
// from its sentinel.
func reply(w http.ResponseWriter, v any, err error) {
	if err != nil {
		status := http.StatusBadRequest
		switch {
		case errors.Is(err, ErrUnknownHost), errors.Is(err, ErrNoForward):
			status = http.StatusNotFound
		case errors.Is(err, ErrConflict):
			status = http.StatusConflict
		case errors.Is(err, ErrClosed):
			status = http.StatusServiceUnavailable
		}
		writeError(w, status, err)
		return
	}
	if v == nil {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, err error) {
	e := apiError{Error: err.Error()}
	for code, s := range sentinels {
		if errors.Is(err, s) {
			e.Code = code
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(e)
}
