package io.kafkathrottle.shim;

import java.lang.management.ManagementFactory;
import java.util.function.Supplier;

import javax.management.JMException;
import javax.management.MBeanServer;
import javax.management.ObjectName;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The shim's JMX metrics, one MBean per broker: read from the view in force whenever JMX asks,
 * so they cost nothing between reads. A standard MBean on the platform server, beside Kafka's
 * own, where the broker's JMX exporter (jmx_prometheus_javaagent, JConsole) finds it.
 */
public final class EnforcementMetrics implements EnforcementMetricsMBean {
    static final String DOMAIN = "io.kafkathrottle.shim";
    private static final Logger LOG = LoggerFactory.getLogger(ServiceQuotaCallback.class);

    private final Supplier<QuotaView> view;
    private final int brokerId;
    private ObjectName registered;

    EnforcementMetrics(Supplier<QuotaView> view, int brokerId) {
        this.view = view;
        this.brokerId = brokerId;
    }

    static ObjectName name(int brokerId) throws JMException {
        return new ObjectName(DOMAIN + ":type=Enforcement,broker=" + brokerId);
    }

    @Override
    public double getAppliedFactor() {
        return view.get().factor;
    }

    @Override
    public double getWouldApplyFactor() {
        return view.get().wouldFactor;
    }

    @Override
    public double getAppliedMutationFactor() {
        return view.get().mutationFactor;
    }

    @Override
    public double getWouldApplyMutationFactor() {
        return view.get().wouldMutationFactor;
    }

    @Override
    public boolean isEnforcing() {
        return view.get().enforcing;
    }

    @Override
    public int getBrokerId() {
        return brokerId;
    }

    /** Registers on the platform MBean server; a name already taken (another shim of the same broker id in this JVM) is logged, not fatal. */
    void register() {
        MBeanServer server = ManagementFactory.getPlatformMBeanServer();
        try {
            ObjectName name = name(brokerId);
            server.registerMBean(this, name);
            registered = name;
        } catch (JMException e) {
            LOG.warn("Throttle service shim: JMX metrics not registered ({}); the shim carries on without them", e.toString());
        }
    }

    void unregister() {
        if (registered != null) {
            try {
                ManagementFactory.getPlatformMBeanServer().unregisterMBean(registered);
            } catch (JMException e) {
                // already gone: nothing to undo
            }
            registered = null;
        }
    }
}
