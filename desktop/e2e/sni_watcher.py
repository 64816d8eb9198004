"""A StatusNotifierWatcher on the session bus, as a desktop's tray host
(GNOME's AppIndicator extension, KDE's Plasma) runs one: an app's tray icon
registers its StatusNotifierItem here and exports its menu over
com.canonical.dbusmenu, where the e2e reads it (gdbus).

Prints one line per registration, `registered BUS PATH`, then serves until
killed.
"""

import asyncio
import sys

from dbus_next import BusType, Message, MessageType, PropertyAccess
from dbus_next.aio import MessageBus
from dbus_next.service import ServiceInterface, dbus_property, method, signal

WATCHER = "org.kde.StatusNotifierWatcher"


class Watcher(ServiceInterface):
    def __init__(self):
        super().__init__(WATCHER)
        self.items = []

    @method()
    def RegisterStatusNotifierItem(self, service: "s"):  # noqa: F821 (dbus-next reads the annotation)
        pass  # recorded by on_message, which sees the sender

    @method()
    def RegisterStatusNotifierHost(self, service: "s"):  # noqa: F821
        pass

    @dbus_property(access=PropertyAccess.READ)
    def RegisteredStatusNotifierItems(self) -> "as":  # noqa: F821
        return self.items

    @dbus_property(access=PropertyAccess.READ)
    def IsStatusNotifierHostRegistered(self) -> "b":  # noqa: F821
        return True

    @dbus_property(access=PropertyAccess.READ)
    def ProtocolVersion(self) -> "i":  # noqa: F821
        return 0

    @signal()
    def StatusNotifierItemRegistered(self, item) -> "s":  # noqa: F821
        return item


async def main():
    bus = await MessageBus(bus_type=BusType.SESSION).connect()
    watcher = Watcher()

    def on_message(msg: Message):
        if msg.message_type == MessageType.METHOD_CALL and msg.member == "RegisterStatusNotifierItem":
            service = msg.body[0]
            # An object path on the caller's connection, or a bus name.
            bus_name, path = (msg.sender, service) if service.startswith("/") else (service, "/StatusNotifierItem")
            watcher.items.append(f"{bus_name}{path}")
            watcher.StatusNotifierItemRegistered(f"{bus_name}{path}")
            print(f"registered {bus_name} {path}", flush=True)
        return None  # the interface answers the call

    bus.add_message_handler(on_message)
    bus.export("/StatusNotifierWatcher", watcher)
    await bus.request_name(WATCHER)
    print("watching", flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        sys.exit(0)
