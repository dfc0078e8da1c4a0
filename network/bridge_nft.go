package network

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
)

// The host's rules for bridge networks live in two tables of bothy's own,
// both named after the instance ("bothy"), created with the first network and deleted with the
// last; nothing else in the host's ruleset is read or changed.
//
//	table inet bothy {
//	  set bridges  { type ifname }                 every bothy bridge
//	  map netfwd   { type ifname : verdict }       bridge → jump net-BRIDGE
//	  map egress   { type ipv4_addr : verdict }    sandbox address → jump eg-ID
//	  map pub_tcp  { type inet_service : verdict } host port → jump pub-ID
//	  map pub_udp  { type inet_service : verdict }
//	  chain forward     { hook forward: iifname vmap @netfwd; iifname @bridges ip saddr vmap @egress;
//	                      oifname @bridges ct state established,related accept;
//	                      oifname @bridges ct status dnat accept; oifname @bridges drop }
//	  chain net-BRIDGE  { [oifname BRIDGE accept (named networks)]; oifname @bridges reject }
//	  chain eg-ID       { ct state established,related accept; ALLOWED accept; reject }
//	  chain input       { iifname @bridges ct state established,related accept; iifname @bridges reject }
//	  chain out         { hook output: oifname @bridges ct state established,related accept;
//	                      oifname @bridges ct status dnat accept; oifname @bridges reject }
//	  chain prerouting  { hook prerouting (dstnat): fib daddr type local tcp dport vmap @pub_tcp; … udp }
//	  chain output      { hook output (dstnat): the same, for connections from the host itself }
//	  chain pub-ID      { [ip daddr HOSTIP] tcp dport HOSTPORT dnat ip to ADDR:PORT … }
//	  chain postrouting { hook postrouting (srcnat): oifname @bridges ip saddr 127.0.0.0/8 masquerade;
//	                      iifname @bridges oifname != @bridges masquerade }
//	}
//	table bridge bothy {
//	  map ports { type ifname : verdict }          host veth → jump port-ID
//	  chain prerouting { hook prerouting: iifname vmap @ports }
//	  chain port-ID    { ether type ip ip saddr ADDR accept; ether type arp arp saddr ip ADDR accept; drop }
//	}
//
// The bridge table keeps a sandbox to its own address (no spoofing another
// sandbox's, whose egress policy may be wider) and to IPv4 and ARP. The
// forward chain keeps networks apart: the default network's ports are also
// isolated on the bridge (BR_ISOLATED), so its sandboxes reach neither each
// other nor another network; a named network's sandboxes share a bridge and
// reach each other there. Nothing reaches a sandbox from outside but replies
// and published ports, and sandboxes reach nothing on the host itself but
// replies (the host's own services are not theirs). What a sandbox may not
// reach is rejected (icmpx admin-prohibited), so that it fails at once.
// Nor does the host reach
// them, but through published ports: a host user's process (a rootless
// sandbox's helper among them) cannot connect to a sandbox's address.

type hostRules struct {
	c       *nftables.Conn
	inet    *nftables.Table
	br      *nftables.Table
	bridges *nftables.Set
	netfwd  *nftables.Set
	egress  *nftables.Set
	pubTCP  *nftables.Set
	pubUDP  *nftables.Set
	ports   *nftables.Set
}

func newHostRules(c *nftables.Conn, name string) *hostRules {
	inet := &nftables.Table{Name: name, Family: nftables.TableFamilyINet}
	br := &nftables.Table{Name: name, Family: nftables.TableFamilyBridge}
	vm := func(t *nftables.Table, name string, key nftables.SetDatatype) *nftables.Set {
		return &nftables.Set{Table: t, Name: name, KeyType: key, DataType: nftables.TypeVerdict, IsMap: true}
	}
	return &hostRules{
		c: c, inet: inet, br: br,
		bridges: &nftables.Set{Table: inet, Name: "bridges", KeyType: nftables.TypeIFName},
		netfwd:  vm(inet, "netfwd", nftables.TypeIFName),
		egress:  vm(inet, "egress", nftables.TypeIPAddr),
		pubTCP:  vm(inet, "pub_tcp", nftables.TypeInetService),
		pubUDP:  vm(inet, "pub_udp", nftables.TypeInetService),
		ports:   vm(br, "ports", nftables.TypeIFName),
	}
}

// exists reports whether bothy's inet table is there.
func (h *hostRules) exists() (bool, error) {
	tables, err := h.c.ListTablesOfFamily(nftables.TableFamilyINet)
	if err != nil {
		return false, fmt.Errorf("list nftables tables: %w", err)
	}
	return slices.ContainsFunc(tables, func(t *nftables.Table) bool { return t.Name == h.inet.Name }), nil
}

// ensure creates both tables, their sets and base chains, unless they are
// there.
func (h *hostRules) ensure() error {
	ok, err := h.exists()
	if err != nil || ok {
		return err
	}
	c := h.c
	// A bridge table left without its inet twin (an interrupted removal)
	// is replaced.
	if brs, err := c.ListTablesOfFamily(nftables.TableFamilyBridge); err == nil &&
		slices.ContainsFunc(brs, func(t *nftables.Table) bool { return t.Name == h.br.Name }) {
		c.DelTable(h.br)
	}
	c.AddTable(h.inet)
	c.AddTable(h.br)
	for _, s := range []*nftables.Set{h.bridges, h.netfwd, h.egress, h.pubTCP, h.pubUDP, h.ports} {
		if err := c.AddSet(s, nil); err != nil {
			return fmt.Errorf("nftables set %s: %w", s.Name, err)
		}
	}
	policy := nftables.ChainPolicyAccept
	base := func(t *nftables.Table, name string, typ nftables.ChainType, hook *nftables.ChainHook, prio *nftables.ChainPriority) *nftables.Chain {
		return c.AddChain(&nftables.Chain{Name: name, Table: t, Type: typ, Hooknum: hook, Priority: prio, Policy: &policy})
	}
	add := func(ch *nftables.Chain, exprs ...[]expr.Any) {
		for _, e := range exprs {
			c.AddRule(&nftables.Rule{Table: ch.Table, Chain: ch, Exprs: e})
		}
	}
	fwd := base(h.inet, "forward", nftables.ChainTypeFilter, nftables.ChainHookForward, nftables.ChainPriorityFilter)
	add(fwd,
		vmap(loadMeta(expr.MetaKeyIIFNAME), h.netfwd),
		rule(ifIn(expr.MetaKeyIIFNAME, h.bridges, false), ipv4(), vmap(loadAddr(saddr), h.egress)),
		rule(ifIn(expr.MetaKeyOIFNAME, h.bridges, false), established(), one(accept())),
		rule(ifIn(expr.MetaKeyOIFNAME, h.bridges, false), ctDNAT(), one(accept())),
		rule(ifIn(expr.MetaKeyOIFNAME, h.bridges, false), one(drop())),
	)
	in := base(h.inet, "input", nftables.ChainTypeFilter, nftables.ChainHookInput, nftables.ChainPriorityFilter)
	add(in,
		rule(ifIn(expr.MetaKeyIIFNAME, h.bridges, false), established(), one(accept())),
		rule(ifIn(expr.MetaKeyIIFNAME, h.bridges, false), one(refuse())),
	)
	out := base(h.inet, "out", nftables.ChainTypeFilter, nftables.ChainHookOutput, nftables.ChainPriorityFilter)
	add(out,
		rule(ifIn(expr.MetaKeyOIFNAME, h.bridges, false), established(), one(accept())),
		rule(ifIn(expr.MetaKeyOIFNAME, h.bridges, false), ctDNAT(), one(accept())),
		rule(ifIn(expr.MetaKeyOIFNAME, h.bridges, false), one(refuse())),
	)
	for _, hook := range []struct {
		name string
		hook *nftables.ChainHook
	}{{"prerouting", nftables.ChainHookPrerouting}, {"output", nftables.ChainHookOutput}} {
		ch := base(h.inet, hook.name, nftables.ChainTypeNAT, hook.hook, nftables.ChainPriorityNATDest)
		add(ch,
			rule(ipv4(), fibDaddrLocal(), l4proto("tcp"), vmap(loadDport(), h.pubTCP)),
			rule(ipv4(), fibDaddrLocal(), l4proto("udp"), vmap(loadDport(), h.pubUDP)),
		)
	}
	post := base(h.inet, "postrouting", nftables.ChainTypeNAT, nftables.ChainHookPostrouting, nftables.ChainPriorityNATSource)
	add(post,
		rule(ipv4(), ifIn(expr.MetaKeyOIFNAME, h.bridges, false), addrIn(saddr, loopbackNet), one(masq())),
		rule(ipv4(), ifIn(expr.MetaKeyIIFNAME, h.bridges, false), ifIn(expr.MetaKeyOIFNAME, h.bridges, true), one(masq())),
	)
	brPre := base(h.br, "prerouting", nftables.ChainTypeFilter, nftables.ChainHookPrerouting, nftables.ChainPriorityRef(-200))
	add(brPre, vmap(loadMeta(expr.MetaKeyIIFNAME), h.ports))
	if err := c.Flush(); err != nil {
		return fmt.Errorf("create nftables tables %s: %w", h.inet.Name, err)
	}
	return nil
}

// deleteTables deletes both tables.
func (h *hostRules) deleteTables() error {
	for _, fam := range []nftables.TableFamily{nftables.TableFamilyINet, nftables.TableFamilyBridge} {
		tables, err := h.c.ListTablesOfFamily(fam)
		if err != nil {
			return fmt.Errorf("list nftables tables: %w", err)
		}
		if slices.ContainsFunc(tables, func(t *nftables.Table) bool { return t.Name == h.inet.Name }) {
			h.c.DelTable(&nftables.Table{Name: h.inet.Name, Family: fam})
		}
	}
	if err := h.c.Flush(); err != nil {
		return fmt.Errorf("delete nftables tables %s: %w", h.inet.Name, err)
	}
	return nil
}

func netChain(bridge string) string { return "net-" + bridge }
func egChain(id string) string      { return "eg-" + id }
func pubChain(id string) string     { return "pub-" + id }
func portChain(id string) string    { return "port-" + id }

// addNetwork adds a network's bridge: named networks' sandboxes reach each
// other, the default network's do not.
func (h *hostRules) addNetwork(bridge string, named bool) error {
	has, err := h.hasElement(h.netfwd, ifname(bridge))
	if err != nil || has {
		return err
	}
	c := h.c
	ch := c.AddChain(&nftables.Chain{Name: netChain(bridge), Table: h.inet})
	if named {
		c.AddRule(&nftables.Rule{Table: h.inet, Chain: ch, Exprs: rule(ifIs(expr.MetaKeyOIFNAME, bridge), one(accept()))})
	}
	c.AddRule(&nftables.Rule{Table: h.inet, Chain: ch, Exprs: rule(ifIn(expr.MetaKeyOIFNAME, h.bridges, false), one(refuse()))})
	if err := c.SetAddElements(h.bridges, []nftables.SetElement{{Key: ifname(bridge)}}); err != nil {
		return err
	}
	if err := c.SetAddElements(h.netfwd, []nftables.SetElement{{Key: ifname(bridge), VerdictData: jump(ch.Name)}}); err != nil {
		return err
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("add nftables rules for %s: %w", bridge, err)
	}
	return nil
}

// removeNetwork removes what addNetwork added, whatever of it is there.
func (h *hostRules) removeNetwork(bridge string) error {
	if err := h.delElement(h.netfwd, ifname(bridge)); err != nil {
		return err
	}
	if err := h.delElement(h.bridges, ifname(bridge)); err != nil {
		return err
	}
	if err := h.delChains(h.inet, netChain(bridge)); err != nil {
		return err
	}
	if err := h.c.Flush(); err != nil {
		return fmt.Errorf("remove nftables rules for %s: %w", bridge, err)
	}
	return nil
}

// addSandbox adds a sandbox's rules: its egress policy, its published
// ports and its bridge port's source check.
func (h *hostRules) addSandbox(a *Attachment) error {
	c := h.c
	addr := a.Address.Addr()
	if a.Egress.Deny {
		ch := c.AddChain(&nftables.Chain{Name: egChain(a.ID), Table: h.inet})
		for _, e := range egressRules(a.Egress, refuse()) {
			c.AddRule(&nftables.Rule{Table: h.inet, Chain: ch, Exprs: e})
		}
		a4 := addr.As4()
		if err := c.SetAddElements(h.egress, []nftables.SetElement{{Key: a4[:], VerdictData: jump(ch.Name)}}); err != nil {
			return err
		}
	}
	if ports := a.stackPorts(); len(ports) > 0 {
		ch := c.AddChain(&nftables.Chain{Name: pubChain(a.ID), Table: h.inet})
		var tcp, udp []nftables.SetElement
		for _, p := range ports {
			var match []expr.Any
			if !p.HostIP.IsUnspecified() {
				match = addrIs(daddr, p.HostIP)
			}
			c.AddRule(&nftables.Rule{Table: h.inet, Chain: ch, Exprs: rule(ipv4(), match, l4proto(p.Proto), dportIs(p.HostPort), dnat(addr, p.ContainerPort))})
			el := nftables.SetElement{Key: port16(p.HostPort), VerdictData: jump(ch.Name)}
			if p.Proto == "udp" {
				udp = append(udp, el)
			} else {
				tcp = append(tcp, el)
			}
		}
		for _, s := range []struct {
			set *nftables.Set
			els []nftables.SetElement
		}{{h.pubTCP, tcp}, {h.pubUDP, udp}} {
			if len(s.els) > 0 {
				if err := c.SetAddElements(s.set, s.els); err != nil {
					return err
				}
			}
		}
	}
	ch := c.AddChain(&nftables.Chain{Name: portChain(a.ID), Table: h.br})
	c.AddRule(&nftables.Rule{Table: h.br, Chain: ch, Exprs: rule(etherType(0x0800), addrIs(saddr, addr), one(accept()))})
	c.AddRule(&nftables.Rule{Table: h.br, Chain: ch, Exprs: rule(etherType(0x0806), arpSenderIs(addr), one(accept()))})
	c.AddRule(&nftables.Rule{Table: h.br, Chain: ch, Exprs: one(drop())})
	if err := c.SetAddElements(h.ports, []nftables.SetElement{{Key: ifname(a.HostVeth), VerdictData: jump(ch.Name)}}); err != nil {
		return err
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("add nftables rules for sandbox %s: %w", a.ID, err)
	}
	return nil
}

// removeSandbox removes what addSandbox added, whatever of it is there:
// it works from the recorded attachment alone, after any interruption. A
// map element goes only if it still jumps to this sandbox's chain: a
// record kept after its lease was reclaimed (a stopped sandbox removed
// later) names an address and host ports that another sandbox may hold
// now, whose policy and ports must stay.
func (h *hostRules) removeSandbox(a *Attachment) error {
	if a.Address.IsValid() {
		a4 := a.Address.Addr().As4()
		if err := h.delElementTo(h.egress, a4[:], egChain(a.ID)); err != nil {
			return err
		}
	}
	for _, p := range a.stackPorts() {
		set := h.pubTCP
		if p.Proto == "udp" {
			set = h.pubUDP
		}
		if err := h.delElementTo(set, port16(p.HostPort), pubChain(a.ID)); err != nil {
			return err
		}
	}
	if a.HostVeth != "" {
		if err := h.delElementTo(h.ports, ifname(a.HostVeth), portChain(a.ID)); err != nil {
			return err
		}
	}
	if err := h.delChains(h.inet, egChain(a.ID), pubChain(a.ID)); err != nil {
		return err
	}
	if err := h.delChains(h.br, portChain(a.ID)); err != nil {
		return err
	}
	if err := h.c.Flush(); err != nil {
		return fmt.Errorf("remove nftables rules of sandbox %s: %w", a.ID, err)
	}
	return nil
}

// hasElement reports whether set has key.
func (h *hostRules) hasElement(set *nftables.Set, key []byte) (bool, error) {
	els, err := h.c.GetSetElements(set)
	if err != nil {
		return false, fmt.Errorf("list nftables set %s: %w", set.Name, err)
	}
	return slices.ContainsFunc(els, func(e nftables.SetElement) bool { return bytes.Equal(e.Key, key) }), nil
}

// delElement queues the deletion of key from set, if it is there.
func (h *hostRules) delElement(set *nftables.Set, key []byte) error {
	has, err := h.hasElement(set, key)
	if err != nil || !has {
		return err
	}
	return h.c.SetDeleteElements(set, []nftables.SetElement{{Key: key}})
}

// delElementTo queues the deletion of key from the verdict map set, if it
// is there and jumps to chain.
func (h *hostRules) delElementTo(set *nftables.Set, key []byte, chain string) error {
	els, err := h.c.GetSetElements(set)
	if err != nil {
		return fmt.Errorf("list nftables set %s: %w", set.Name, err)
	}
	if !slices.ContainsFunc(els, func(e nftables.SetElement) bool { return bytes.Equal(e.Key, key) && verdictChain(e.Val) == chain }) {
		return nil
	}
	return h.c.SetDeleteElements(set, []nftables.SetElement{{Key: key}})
}

// verdictChain returns the chain a verdict map element's data jumps to:
// the data as google/nftables reads it is the verdict's netlink
// attributes (NFTA_VERDICT_CODE, NFTA_VERDICT_CHAIN).
func verdictChain(data []byte) string {
	const verdictChainAttr = 2 // NFTA_VERDICT_CHAIN
	for len(data) >= 4 {
		n := int(binary.NativeEndian.Uint16(data))
		typ := binary.NativeEndian.Uint16(data[2:]) & 0x3fff
		if n < 4 || n > len(data) {
			return ""
		}
		if typ == verdictChainAttr {
			return strings.TrimRight(string(data[4:n]), "\x00")
		}
		data = data[min((n+3)&^3, len(data)):]
	}
	return ""
}

// delChains queues the flush and deletion of the named chains of t that
// exist.
func (h *hostRules) delChains(t *nftables.Table, names ...string) error {
	chains, err := h.c.ListChainsOfTableFamily(t.Family)
	if err != nil {
		return fmt.Errorf("list nftables chains: %w", err)
	}
	for _, ch := range chains {
		if ch.Table.Name == t.Name && slices.Contains(names, ch.Name) {
			ch := &nftables.Chain{Name: ch.Name, Table: t}
			h.c.FlushChain(ch)
			h.c.DelChain(ch)
		}
	}
	return nil
}
