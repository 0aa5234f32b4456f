package io.kafkathrottle.shim;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Map;

import org.apache.kafka.common.config.ConfigException;
import org.junit.jupiter.api.Test;

class QuotaWindowTest {
    private static final long SECOND = 1_000_000_000L;

    @Test
    void withoutTheBrokerSettingsItIsKafkasDefaultOf11SamplesOf1Second() {
        QuotaWindow window = QuotaWindow.fromBrokerConfig(Map.of("broker.id", "1"));
        assertEquals(new QuotaWindow(11, SECOND), window);
        assertEquals(12 * SECOND, window.spanNanos(), "11 samples plus the one Kafka keeps for the overlap");
        assertEquals(SECOND / 4, window.tickNanos());
    }

    @Test
    void theBrokersOwnQuotaWindowSettingsAreRead() {
        assertEquals(new QuotaWindow(5, 2 * SECOND), QuotaWindow.fromBrokerConfig(Map.of("quota.window.num", "5", "quota.window.size.seconds", 2)));
    }

    @Test
    void aYoungSensorDividesByAtLeastSamplesMinusOneWindowsAndAHalfItsAgeUntilASpanHasPassedThenSamplesAndAHalf() {
        QuotaWindow window = QuotaWindow.KAFKA_DEFAULT;
        assertEquals(10_500_000_000L, window.divisorNanos(0));
        assertEquals(10_500_000_000L, window.divisorNanos(4 * SECOND));
        assertEquals(11 * SECOND, window.divisorNanos(11 * SECOND), "between the two, the sensor's age");
        assertEquals(11_900_000_000L, window.divisorNanos(11_900_000_000L), "no byte dropped before a whole span");
        assertEquals(11_500_000_000L, window.divisorNanos(12 * SECOND));
        assertEquals(11_500_000_000L, window.divisorNanos(60 * SECOND));
        assertEquals(11_500_000_000L, window.divisorNanos(Long.MAX_VALUE));
    }

    @Test
    void aBadQuotaWindowSettingNamesTheKey() {
        ConfigException error = assertThrows(ConfigException.class, () -> QuotaWindow.fromBrokerConfig(Map.of("quota.window.num", "zero")));
        assertTrue(error.getMessage().contains("quota.window.num") && error.getMessage().contains("zero"), error.getMessage());
    }
}
