# -*- coding: utf-8 -*-
"""NetworkManager's own keyfile reader through libnm, run with the system Python (``/usr/bin/python3 -I``:
python3-gi and gir1.2-nm-1.0 are Debian's, not the venv's). test_consumers_netplan.py runs it.

    nm_keyfile_check.py --property SETTING.PROPERTY VALUE   # nmcli's "connection modify" target: does NM know it?
    nm_keyfile_check.py FILE...                             # keyfiles as the NetworkManager daemon reads them

Prints one JSON object. A keyfile is read as the daemon's keyfile plugin does: ``NM.keyfile_read`` (every warning
of the reader recorded), a UUID derived from the file name when the file has none (netplan writes none; the daemon
does the same), then ``normalize()``, which also verifies. Per file: {"id", "type", "interface", "mtu",
"warnings", "error"}.
"""
from __future__ import absolute_import, division, print_function

import json
import sys
import uuid

import gi

gi.require_version("NM", "1.0")
from gi.repository import GLib, GObject, NM  # noqa: E402

__metaclass__ = type


def read(path):
    warnings = []

    def handler(_keyfile, _connection, htype, hdata, *_a):
        if htype == NM.KeyfileHandlerType.WARN:
            warnings.append(hdata.warn_get().out_message)
        return False

    out = {"warnings": warnings, "error": None}
    try:
        kf = GLib.KeyFile()
        kf.load_from_file(path, GLib.KeyFileFlags.NONE)
        con = NM.keyfile_read(kf, "/", NM.KeyfileHandlerFlags.NONE, handler, None)
        s_con = con.get_setting_connection()
        if s_con is not None and not s_con.get_uuid():
            s_con.set_property("uuid", str(uuid.uuid5(uuid.NAMESPACE_URL, "keyfile:" + path)))
        con.normalize()
        wired = con.get_setting_wired()
        out.update(id=con.get_id(), type=con.get_connection_type(), interface=con.get_interface_name(),
                   mtu=wired.get_mtu() if wired is not None else None)
    except GLib.Error as e:
        out["error"] = e.message
    return out


def has_property(key, value):
    setting, _dot, prop = key.partition(".")
    gtype = NM.Setting.lookup_type(setting)
    if gtype is None or gtype == GObject.TYPE_INVALID:
        return {"error": "NetworkManager has no setting %r" % setting}
    obj = GObject.new(gtype)
    spec = obj.find_property(prop)
    if spec is None:
        return {"error": "setting %s has no property %r" % (setting, prop)}
    try:
        obj.set_property(prop, int(value) if spec.value_type in (GObject.TYPE_UINT, GObject.TYPE_INT) else value)
    except (TypeError, ValueError, OverflowError) as e:
        return {"error": "%s=%s: %s" % (key, value, e)}
    return {"error": None, "value": obj.get_property(prop)}


def main(argv):
    if argv[:1] == ["--property"]:
        print(json.dumps(has_property(argv[1], argv[2])))
    else:
        print(json.dumps(dict((p, read(p)) for p in argv)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
