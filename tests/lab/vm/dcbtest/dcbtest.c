// SPDX-License-Identifier: GPL-2.0
/*
 * dcbtest - Ethernet test netdevs with IEEE DCBNL ops carrying mlx5's semantics.
 *
 * Part of the gpufabric.node VM lab (tier 3). No emulated NIC implements
 * DCBNL, so this module registers `count` Ethernet netdevs named dcb0, dcb1, ...
 * Devices are paired (dcb0<->dcb1, dcb2<->dcb3, ...): a frame sent on one is
 * delivered to its peer, as on a veth pair. With an odd count the last device
 * delivers to itself. rdma_rxe can sit on them.
 *
 * DCB behaviour modelled on the mlx5 Ethernet driver (en_dcbnl.c):
 *  - ieee_setpfc compares the requested pfc_en with the current one and only
 *    then programs it and toggles the port link (carrier off/on); the toggle is
 *    counted in /sys/class/net/<dev>/dcbtest/link_toggles.
 *  - ieee_setapp accepts DSCP selector entries only. The first DSCP entry moves
 *    the port to DSCP trust; at that moment the 64 default entries
 *    (priority = dscp >> 3) are published in the APP table, then the requested
 *    entry replaces its default. ieee_delapp removes an entry only when it
 *    matches the current mapping and resets that DSCP to priority 0; when the
 *    last DSCP entry is gone the port returns to PCP trust.
 *  - No dcbnl_setapptrust (mlx5 has none).
 *
 * Per-priority counters with mlx5's ethtool -S names: rx_prio{p}_bytes,
 * _packets, _discards and tx_prio{p}_bytes, _packets for p = 0..7, plus
 * rx/tx_prio{p}_pause, _pause_duration and rx_prio{p}_pause_transition only
 * for the priorities with PFC enabled (mlx5 lists PFC counters only for those).
 * Every frame is classified the way the NIC classifies it: in DSCP trust by
 * the DSCP of an IPv4/IPv6 frame through the port's DSCP->priority table;
 * otherwise (PCP trust, or a non-IP frame) by the VLAN PCP, untagged -> 0.
 * The sender's tx counters use the sender's classification, the peer's rx
 * counters the peer's own (as each port's hardware would). A frame the peer
 * does not take (netif_rx refused it) is an rx_prio{p}_discard on the peer.
 * There is no congestion model: the driver never sends or honours a pause
 * frame, so the pause counters exist (PFC state) and stay 0.
 */

#include <linux/module.h>
#include <linux/kernel.h>
#include <linux/netdevice.h>
#include <linux/etherdevice.h>
#include <linux/ethtool.h>
#include <linux/if_vlan.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <net/dsfield.h>
#include <linux/rtnetlink.h>
#include <linux/u64_stats_sync.h>
#include <net/dcbnl.h>

#define DCBTEST_MAX_DEVS	16
#define DCBTEST_MAX_DSCP	64
#define DCBTEST_MAX_PRIO	8
#define DCBTEST_MAX_TCS		8
#define DCBTEST_MAX_BW		100
#define DCBTEST_MAX_CABLE_LEN	1000
#define DCBTEST_DEF_CABLE_LEN	7

enum dcbtest_trust {
	DCBTEST_TRUST_PCP = 1,
	DCBTEST_TRUST_DSCP = 2,
};

static unsigned int count = 2;
module_param(count, uint, 0444);
MODULE_PARM_DESC(count, "number of dcbN netdevs to register (1-16, default 2)");

struct dcbtest_stats {
	u64 packets;
	u64 bytes;
	struct u64_stats_sync syncp;
};

/* mlx5 per-priority traffic counters, in mlx5's ethtool -S order. */
enum {
	DCBTEST_RX_BYTES,
	DCBTEST_RX_PACKETS,
	DCBTEST_RX_DISCARDS,
	DCBTEST_TX_BYTES,
	DCBTEST_TX_PACKETS,
	DCBTEST_PRIO_NSTATS,
};

static const char * const dcbtest_prio_stat_fmt[DCBTEST_PRIO_NSTATS] = {
	"rx_prio%d_bytes",
	"rx_prio%d_packets",
	"rx_prio%d_discards",
	"tx_prio%d_bytes",
	"tx_prio%d_packets",
};

/* mlx5's PFC counters, listed only for priorities with PFC enabled. */
static const char * const dcbtest_pfc_stat_fmt[] = {
	"rx_prio%d_pause",
	"rx_prio%d_pause_duration",
	"tx_prio%d_pause",
	"tx_prio%d_pause_duration",
	"rx_prio%d_pause_transition",
};

#define DCBTEST_PFC_NSTATS	ARRAY_SIZE(dcbtest_pfc_stat_fmt)

struct dcbtest_priv {
	struct net_device *dev;
	struct net_device *peer;
	struct dcbtest_stats __percpu *tx;
	atomic64_t tx_dropped;
	/* per-priority counters; rx ones are updated by the peer's xmit */
	atomic64_t prio_stats[DCBTEST_MAX_PRIO][DCBTEST_PRIO_NSTATS];

	/* DCB state, protected by RTNL (dcbnl calls ops under it). */
	struct ieee_ets ets;
	u8 pfc_en;
	u16 cable_len;
	u8 dcbx_cap;
	u8 trust;
	u8 dscp2prio[DCBTEST_MAX_DSCP];
	unsigned int dscp_app_cnt;
	unsigned long link_toggles;
};

static struct net_device *dcbtest_devs[DCBTEST_MAX_DEVS];

/* ---- data path ---------------------------------------------------------- */

/* The priority a port's hardware gives a frame (skb->data at the MAC header).
 * DSCP trust: an IPv4/IPv6 frame takes dscp2prio[DSCP]; anything else, and
 * every frame in PCP trust, takes the VLAN PCP, 0 when untagged.
 */
static u8 dcbtest_classify(const struct dcbtest_priv *priv, const struct sk_buff *skb)
{
	unsigned int off = ETH_HLEN;
	const struct ethhdr *eth;
	__be16 proto;
	int pcp = -1;

	if (skb->len < ETH_HLEN)
		return 0;
	eth = (const struct ethhdr *)skb->data;
	proto = eth->h_proto;
	if (skb_vlan_tag_present(skb)) {
		pcp = skb_vlan_tag_get_prio(skb);
	} else if (proto == htons(ETH_P_8021Q) || proto == htons(ETH_P_8021AD)) {
		struct vlan_hdr vbuf;
		const struct vlan_hdr *vh = skb_header_pointer(skb, off, sizeof(vbuf), &vbuf);

		if (!vh)
			return 0;
		pcp = (ntohs(vh->h_vlan_TCI) & VLAN_PRIO_MASK) >> VLAN_PRIO_SHIFT;
		proto = vh->h_vlan_encapsulated_proto;
		off += VLAN_HLEN;
	}

	if (READ_ONCE(priv->trust) == DCBTEST_TRUST_DSCP) {
		int dscp = -1;

		if (proto == htons(ETH_P_IP)) {
			struct iphdr ibuf;
			const struct iphdr *ih = skb_header_pointer(skb, off, sizeof(ibuf), &ibuf);

			if (ih)
				dscp = ipv4_get_dsfield(ih) >> 2;
		} else if (proto == htons(ETH_P_IPV6)) {
			struct ipv6hdr ibuf;
			const struct ipv6hdr *ih = skb_header_pointer(skb, off, sizeof(ibuf), &ibuf);

			if (ih)
				dscp = ipv6_get_dsfield(ih) >> 2;
		}
		if (dscp >= 0)
			return READ_ONCE(priv->dscp2prio[dscp]);
	}
	return pcp >= 0 ? pcp : 0;
}

static void dcbtest_count(struct dcbtest_priv *priv, u8 prio, int bytes_stat,
			  int packets_stat, unsigned int len)
{
	atomic64_add(len, &priv->prio_stats[prio][bytes_stat]);
	atomic64_inc(&priv->prio_stats[prio][packets_stat]);
}

static netdev_tx_t dcbtest_xmit(struct sk_buff *skb, struct net_device *dev)
{
	struct dcbtest_priv *priv = netdev_priv(dev);
	struct net_device *peer = priv->peer;
	unsigned int len = skb->len;
	struct dcbtest_priv *pp;
	u8 tx_prio, rx_prio;

	if (!netif_carrier_ok(dev) || !peer) {
		atomic64_inc(&priv->tx_dropped);
		dev_kfree_skb_any(skb);
		return NETDEV_TX_OK;
	}

	/* The frame leaves this port (tx, this port's classification) and
	 * reaches the peer, whose hardware classifies it with its own state.
	 */
	pp = netdev_priv(peer);
	tx_prio = dcbtest_classify(priv, skb);
	rx_prio = dcbtest_classify(pp, skb);
	dcbtest_count(priv, tx_prio, DCBTEST_TX_BYTES, DCBTEST_TX_PACKETS, len);

	if (dev_forward_skb(peer, skb) == NET_RX_SUCCESS) {
		dcbtest_count(pp, rx_prio, DCBTEST_RX_BYTES, DCBTEST_RX_PACKETS, len);
		struct dcbtest_stats *st = this_cpu_ptr(priv->tx);

		u64_stats_update_begin(&st->syncp);
		st->packets++;
		st->bytes += len;
		u64_stats_update_end(&st->syncp);
	} else {
		atomic64_inc(&pp->prio_stats[rx_prio][DCBTEST_RX_DISCARDS]);
		atomic64_inc(&priv->tx_dropped);
	}
	return NETDEV_TX_OK;
}

static void dcbtest_get_stats64(struct net_device *dev,
				struct rtnl_link_stats64 *s)
{
	struct dcbtest_priv *priv = netdev_priv(dev);
	int cpu;

	for_each_possible_cpu(cpu) {
		const struct dcbtest_stats *st = per_cpu_ptr(priv->tx, cpu);
		unsigned int start;
		u64 packets, bytes;

		do {
			start = u64_stats_fetch_begin(&st->syncp);
			packets = st->packets;
			bytes = st->bytes;
		} while (u64_stats_fetch_retry(&st->syncp, start));
		s->tx_packets += packets;
		s->tx_bytes += bytes;
	}
	s->tx_dropped = atomic64_read(&priv->tx_dropped);
	/* What the peer sent successfully is what this device received; the core
	 * adds its own rx_dropped (dev->core_stats) on top.
	 */
	if (priv->peer) {
		struct dcbtest_priv *pp = netdev_priv(priv->peer);

		for_each_possible_cpu(cpu) {
			const struct dcbtest_stats *st = per_cpu_ptr(pp->tx, cpu);
			unsigned int start;
			u64 packets, bytes;

			do {
				start = u64_stats_fetch_begin(&st->syncp);
				packets = st->packets;
				bytes = st->bytes;
			} while (u64_stats_fetch_retry(&st->syncp, start));
			s->rx_packets += packets;
			s->rx_bytes += bytes;
		}
	}
}

static int dcbtest_open(struct net_device *dev)
{
	netif_carrier_on(dev);
	netif_start_queue(dev);
	return 0;
}

static int dcbtest_stop(struct net_device *dev)
{
	netif_stop_queue(dev);
	netif_carrier_off(dev);
	return 0;
}

static int dcbtest_dev_init(struct net_device *dev)
{
	struct dcbtest_priv *priv = netdev_priv(dev);

	priv->tx = netdev_alloc_pcpu_stats(struct dcbtest_stats);
	return priv->tx ? 0 : -ENOMEM;
}

static void dcbtest_dev_uninit(struct net_device *dev)
{
	struct dcbtest_priv *priv = netdev_priv(dev);

	free_percpu(priv->tx);
	priv->tx = NULL;
}

static const struct net_device_ops dcbtest_netdev_ops = {
	.ndo_init		= dcbtest_dev_init,
	.ndo_uninit		= dcbtest_dev_uninit,
	.ndo_open		= dcbtest_open,
	.ndo_stop		= dcbtest_stop,
	.ndo_start_xmit		= dcbtest_xmit,
	.ndo_get_stats64	= dcbtest_get_stats64,
	.ndo_set_mac_address	= eth_mac_addr,
	.ndo_validate_addr	= eth_validate_addr,
};

static void dcbtest_get_drvinfo(struct net_device *dev,
				struct ethtool_drvinfo *info)
{
	strscpy(info->driver, "dcbtest", sizeof(info->driver));
	strscpy(info->bus_info, "virtual", sizeof(info->bus_info));
}

static int dcbtest_get_link_ksettings(struct net_device *dev,
				      struct ethtool_link_ksettings *cmd)
{
	cmd->base.speed = SPEED_100000;
	cmd->base.duplex = DUPLEX_FULL;
	cmd->base.port = PORT_OTHER;
	cmd->base.autoneg = AUTONEG_DISABLE;
	return 0;
}

/* ethtool -S runs under RTNL, as setpfc does: the list cannot change between
 * get_sset_count, get_strings and get_ethtool_stats of one request.
 */
static int dcbtest_get_sset_count(struct net_device *dev, int sset)
{
	struct dcbtest_priv *priv = netdev_priv(dev);

	if (sset != ETH_SS_STATS)
		return -EOPNOTSUPP;
	return DCBTEST_MAX_PRIO * DCBTEST_PRIO_NSTATS +
	       hweight8(priv->pfc_en) * DCBTEST_PFC_NSTATS;
}

static void dcbtest_get_strings(struct net_device *dev, u32 sset, u8 *data)
{
	struct dcbtest_priv *priv = netdev_priv(dev);
	int p, i;

	if (sset != ETH_SS_STATS)
		return;
	for (p = 0; p < DCBTEST_MAX_PRIO; p++)
		for (i = 0; i < DCBTEST_PRIO_NSTATS; i++)
			ethtool_sprintf(&data, dcbtest_prio_stat_fmt[i], p);
	for (p = 0; p < DCBTEST_MAX_PRIO; p++) {
		if (!(priv->pfc_en & BIT(p)))
			continue;
		for (i = 0; i < DCBTEST_PFC_NSTATS; i++)
			ethtool_sprintf(&data, dcbtest_pfc_stat_fmt[i], p);
	}
}

static void dcbtest_get_ethtool_stats(struct net_device *dev,
				      struct ethtool_stats *stats, u64 *data)
{
	struct dcbtest_priv *priv = netdev_priv(dev);
	int p, i;

	for (p = 0; p < DCBTEST_MAX_PRIO; p++)
		for (i = 0; i < DCBTEST_PRIO_NSTATS; i++)
			*data++ = atomic64_read(&priv->prio_stats[p][i]);
	/* No congestion model: no pause frame is ever sent or received. */
	for (p = 0; p < DCBTEST_MAX_PRIO; p++) {
		if (!(priv->pfc_en & BIT(p)))
			continue;
		for (i = 0; i < DCBTEST_PFC_NSTATS; i++)
			*data++ = 0;
	}
}

static const struct ethtool_ops dcbtest_ethtool_ops = {
	.get_drvinfo		= dcbtest_get_drvinfo,
	.get_link		= ethtool_op_get_link,
	.get_link_ksettings	= dcbtest_get_link_ksettings,
	.get_sset_count		= dcbtest_get_sset_count,
	.get_strings		= dcbtest_get_strings,
	.get_ethtool_stats	= dcbtest_get_ethtool_stats,
};

/* ---- DCBNL (IEEE) ------------------------------------------------------- */

/* Bounce the link the way mlx5_toggle_port_link() does: down, then up again
 * if the port was administratively up.
 */
static void dcbtest_toggle_link(struct net_device *dev)
{
	struct dcbtest_priv *priv = netdev_priv(dev);

	priv->link_toggles++;
	netif_carrier_off(dev);
	if (dev->flags & IFF_UP)
		netif_carrier_on(dev);
}

static int dcbtest_ieee_getets(struct net_device *dev, struct ieee_ets *ets)
{
	struct dcbtest_priv *priv = netdev_priv(dev);

	*ets = priv->ets;
	return 0;
}

static int dcbtest_validate_ets(struct net_device *dev, struct ieee_ets *ets)
{
	bool have_ets_tc = false;
	int bw_sum = 0;
	int i;

	for (i = 0; i < IEEE_8021QAZ_MAX_TCS; i++) {
		if (ets->prio_tc[i] >= DCBTEST_MAX_PRIO) {
			netdev_err(dev, "Failed to validate ETS: priority value greater than max(%d)\n",
				   DCBTEST_MAX_PRIO);
			return -EINVAL;
		}
	}

	for (i = 0; i < IEEE_8021QAZ_MAX_TCS; i++) {
		if (ets->tc_tsa[i] == IEEE_8021QAZ_TSA_ETS) {
			have_ets_tc = true;
			bw_sum += ets->tc_tx_bw[i];
		}
	}

	if (have_ets_tc && bw_sum != 100) {
		netdev_err(dev, "Failed to validate ETS: BW sum is illegal\n");
		return -EINVAL;
	}
	return 0;
}

static int dcbtest_ieee_setets(struct net_device *dev, struct ieee_ets *ets)
{
	struct dcbtest_priv *priv = netdev_priv(dev);
	int err;

	err = dcbtest_validate_ets(dev, ets);
	if (err)
		return err;

	memcpy(priv->ets.prio_tc, ets->prio_tc, sizeof(ets->prio_tc));
	memcpy(priv->ets.tc_tsa, ets->tc_tsa, sizeof(ets->tc_tsa));
	memcpy(priv->ets.tc_tx_bw, ets->tc_tx_bw, sizeof(ets->tc_tx_bw));
	memcpy(priv->ets.tc_rx_bw, ets->tc_rx_bw, sizeof(ets->tc_rx_bw));
	priv->ets.willing = ets->willing;
	return 0;
}

static int dcbtest_ieee_getpfc(struct net_device *dev, struct ieee_pfc *pfc)
{
	struct dcbtest_priv *priv = netdev_priv(dev);

	memset(pfc, 0, sizeof(*pfc));
	pfc->pfc_cap = DCBTEST_MAX_PRIO;
	pfc->pfc_en = priv->pfc_en;
	pfc->delay = priv->cable_len;
	/* requests/indications (per-priority pause counts) stay 0: no wire. */
	return 0;
}

static int dcbtest_ieee_setpfc(struct net_device *dev, struct ieee_pfc *pfc)
{
	struct dcbtest_priv *priv = netdev_priv(dev);

	/* As mlx5: program and bounce the link only when pfc_en changes. */
	if (pfc->pfc_en != priv->pfc_en) {
		priv->pfc_en = pfc->pfc_en;
		dcbtest_toggle_link(dev);
	}

	if (pfc->delay && pfc->delay < DCBTEST_MAX_CABLE_LEN &&
	    pfc->delay != priv->cable_len)
		priv->cable_len = pfc->delay;

	return 0;
}

static u8 dcbtest_getdcbx(struct net_device *dev)
{
	struct dcbtest_priv *priv = netdev_priv(dev);

	return priv->dcbx_cap;
}

static u8 dcbtest_setdcbx(struct net_device *dev, u8 mode)
{
	struct dcbtest_priv *priv = netdev_priv(dev);

	if (mode & DCB_CAP_DCBX_LLD_MANAGED)
		return 1;
	if (!(mode & DCB_CAP_DCBX_HOST))
		return 1;
	if (!(mode & DCB_CAP_DCBX_VER_IEEE))
		return 1;
	priv->dcbx_cap = mode;
	return 0;
}

/* Switching to DSCP trust publishes the whole default DSCP table. */
static void dcbtest_enter_dscp_trust(struct net_device *dev)
{
	struct dcbtest_priv *priv = netdev_priv(dev);
	struct dcb_app def = { .selector = IEEE_8021QAZ_APP_SEL_DSCP };
	int i;

	priv->trust = DCBTEST_TRUST_DSCP;
	priv->dscp_app_cnt = 0;
	for (i = 0; i < DCBTEST_MAX_DSCP; i++) {
		def.protocol = i;
		def.priority = priv->dscp2prio[i];
		if (!dcb_ieee_setapp(dev, &def))
			priv->dscp_app_cnt++;
	}
}

static int dcbtest_ieee_setapp(struct net_device *dev, struct dcb_app *app)
{
	struct dcbtest_priv *priv = netdev_priv(dev);
	struct dcb_app old;
	bool is_new;
	int err;

	if (app->selector != IEEE_8021QAZ_APP_SEL_DSCP ||
	    app->protocol >= DCBTEST_MAX_DSCP || app->priority >= DCBTEST_MAX_PRIO)
		return -EINVAL;

	if (!priv->dscp_app_cnt)
		dcbtest_enter_dscp_trust(dev);

	old.selector = IEEE_8021QAZ_APP_SEL_DSCP;
	old.protocol = app->protocol;
	old.priority = priv->dscp2prio[app->protocol];

	priv->dscp2prio[app->protocol] = app->priority;

	/* Replace the entry that is published for this DSCP, if any. */
	is_new = dcb_ieee_delapp(dev, &old) != 0;

	err = dcb_ieee_setapp(dev, app);
	if (err)
		return err;
	if (is_new)
		priv->dscp_app_cnt++;
	return 0;
}

static int dcbtest_ieee_delapp(struct net_device *dev, struct dcb_app *app)
{
	struct dcbtest_priv *priv = netdev_priv(dev);
	int err;

	if (app->selector != IEEE_8021QAZ_APP_SEL_DSCP ||
	    app->protocol >= DCBTEST_MAX_DSCP)
		return -EINVAL;

	if (!priv->dscp_app_cnt)
		return -ENOENT;

	/* Only the mapping currently in force can be deleted. */
	if (app->priority != priv->dscp2prio[app->protocol])
		return -ENOENT;

	err = dcb_ieee_delapp(dev, app);
	if (err)
		return err;

	priv->dscp2prio[app->protocol] = 0;
	priv->dscp_app_cnt--;
	if (!priv->dscp_app_cnt) {
		int i;

		priv->trust = DCBTEST_TRUST_PCP;
		for (i = 0; i < DCBTEST_MAX_DSCP; i++)
			priv->dscp2prio[i] = i >> 3;
	}
	return 0;
}

static const struct dcbnl_rtnl_ops dcbtest_dcbnl_ops = {
	.ieee_getets	= dcbtest_ieee_getets,
	.ieee_setets	= dcbtest_ieee_setets,
	.ieee_getpfc	= dcbtest_ieee_getpfc,
	.ieee_setpfc	= dcbtest_ieee_setpfc,
	.ieee_setapp	= dcbtest_ieee_setapp,
	.ieee_delapp	= dcbtest_ieee_delapp,
	.getdcbx	= dcbtest_getdcbx,
	.setdcbx	= dcbtest_setdcbx,
};

/* ---- sysfs: /sys/class/net/<dev>/dcbtest/ ------------------------------- */

static ssize_t link_toggles_show(struct device *d, struct device_attribute *attr,
				 char *buf)
{
	struct dcbtest_priv *priv = netdev_priv(to_net_dev(d));
	unsigned long v;

	rtnl_lock();
	v = priv->link_toggles;
	rtnl_unlock();
	return sysfs_emit(buf, "%lu\n", v);
}
static DEVICE_ATTR_RO(link_toggles);

static ssize_t trust_show(struct device *d, struct device_attribute *attr,
			  char *buf)
{
	struct dcbtest_priv *priv = netdev_priv(to_net_dev(d));
	u8 t;

	rtnl_lock();
	t = priv->trust;
	rtnl_unlock();
	return sysfs_emit(buf, "%s\n", t == DCBTEST_TRUST_DSCP ? "dscp" : "pcp");
}
static DEVICE_ATTR_RO(trust);

static ssize_t dscp_app_cnt_show(struct device *d, struct device_attribute *attr,
				 char *buf)
{
	struct dcbtest_priv *priv = netdev_priv(to_net_dev(d));
	unsigned int v;

	rtnl_lock();
	v = priv->dscp_app_cnt;
	rtnl_unlock();
	return sysfs_emit(buf, "%u\n", v);
}
static DEVICE_ATTR_RO(dscp_app_cnt);

static ssize_t peer_show(struct device *d, struct device_attribute *attr,
			 char *buf)
{
	struct dcbtest_priv *priv = netdev_priv(to_net_dev(d));

	return sysfs_emit(buf, "%s\n", priv->peer ? priv->peer->name : "");
}
static DEVICE_ATTR_RO(peer);

static struct attribute *dcbtest_attrs[] = {
	&dev_attr_link_toggles.attr,
	&dev_attr_trust.attr,
	&dev_attr_dscp_app_cnt.attr,
	&dev_attr_peer.attr,
	NULL,
};

static const struct attribute_group dcbtest_attr_group = {
	.name = "dcbtest",
	.attrs = dcbtest_attrs,
};

/* ---- setup -------------------------------------------------------------- */

static void dcbtest_init_dcb(struct dcbtest_priv *priv)
{
	int i;

	/* Defaults as mlx5e_ets_init(): vendor TSA, prio 0 -> TC1, 1 -> TC0. */
	memset(&priv->ets, 0, sizeof(priv->ets));
	priv->ets.ets_cap = DCBTEST_MAX_TCS;
	for (i = 0; i < DCBTEST_MAX_TCS; i++) {
		priv->ets.tc_tx_bw[i] = DCBTEST_MAX_BW;
		priv->ets.tc_tsa[i] = IEEE_8021QAZ_TSA_VENDOR;
		priv->ets.prio_tc[i] = i;
	}
	priv->ets.prio_tc[0] = 1;
	priv->ets.prio_tc[1] = 0;

	priv->pfc_en = 0;
	priv->cable_len = DCBTEST_DEF_CABLE_LEN;
	priv->dcbx_cap = DCB_CAP_DCBX_HOST | DCB_CAP_DCBX_VER_IEEE;
	priv->trust = DCBTEST_TRUST_PCP;
	for (i = 0; i < DCBTEST_MAX_DSCP; i++)
		priv->dscp2prio[i] = i >> 3;
	priv->dscp_app_cnt = 0;
	priv->link_toggles = 0;
}

static void dcbtest_setup(struct net_device *dev)
{
	ether_setup(dev);
	dev->netdev_ops = &dcbtest_netdev_ops;
	dev->ethtool_ops = &dcbtest_ethtool_ops;
	dev->dcbnl_ops = &dcbtest_dcbnl_ops;
	dev->needs_free_netdev = false;
	dev->min_mtu = ETH_MIN_MTU;
	dev->max_mtu = 9000;
	dev->priv_flags |= IFF_NO_QUEUE;
	dev->features |= NETIF_F_LLTX;
	eth_hw_addr_random(dev);
}

static void dcbtest_cleanup(void)
{
	LIST_HEAD(list);
	unsigned int i;

	rtnl_lock();
	for (i = 0; i < DCBTEST_MAX_DEVS; i++) {
		struct net_device *dev = dcbtest_devs[i];

		if (dev && dev->reg_state == NETREG_REGISTERED)
			unregister_netdevice_queue(dev, &list);
	}
	unregister_netdevice_many(&list);
	rtnl_unlock();

	for (i = 0; i < DCBTEST_MAX_DEVS; i++) {
		if (dcbtest_devs[i]) {
			free_netdev(dcbtest_devs[i]);
			dcbtest_devs[i] = NULL;
		}
	}
}

static int __init dcbtest_init(void)
{
	unsigned int i;
	int err;

	if (count < 1 || count > DCBTEST_MAX_DEVS) {
		pr_err("dcbtest: count must be 1..%d\n", DCBTEST_MAX_DEVS);
		return -EINVAL;
	}

	for (i = 0; i < count; i++) {
		struct net_device *dev;
		struct dcbtest_priv *priv;

		dev = alloc_netdev(sizeof(struct dcbtest_priv), "dcb%d",
				   NET_NAME_ENUM, dcbtest_setup);
		if (!dev) {
			err = -ENOMEM;
			goto fail;
		}
		priv = netdev_priv(dev);
		priv->dev = dev;
		atomic64_set(&priv->tx_dropped, 0);
		memset(priv->prio_stats, 0, sizeof(priv->prio_stats));
		dcbtest_init_dcb(priv);
		dev->sysfs_groups[0] = &dcbtest_attr_group;
		dcbtest_devs[i] = dev;
	}

	/* Pair dcb(2k) with dcb(2k+1); an odd last device is its own peer. */
	for (i = 0; i < count; i++) {
		struct dcbtest_priv *priv = netdev_priv(dcbtest_devs[i]);
		unsigned int p = (i % 2 == 0) ? i + 1 : i - 1;

		priv->peer = dcbtest_devs[p < count ? p : i];
	}

	for (i = 0; i < count; i++) {
		err = register_netdev(dcbtest_devs[i]);
		if (err)
			goto fail;
		netif_carrier_off(dcbtest_devs[i]);
	}

	pr_info("dcbtest: %u device(s) registered\n", count);
	return 0;

fail:
	dcbtest_cleanup();
	return err;
}

static void __exit dcbtest_exit(void)
{
	dcbtest_cleanup();
}

module_init(dcbtest_init);
module_exit(dcbtest_exit);

MODULE_LICENSE("GPL");
MODULE_AUTHOR("gpufabric.node lab");
MODULE_DESCRIPTION("Ethernet test netdevs with IEEE DCBNL ops (mlx5 semantics) for the VM lab");
