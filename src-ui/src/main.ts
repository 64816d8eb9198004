import "./style.css";
import { mount } from "./app";

void mount(document.getElementById("app")!);
